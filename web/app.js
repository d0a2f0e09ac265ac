// The demo page: wires the reusable client (sub250.js) to the UI. Every figure shown is either the
// server's (from sub250.turn.latency) or measured here on the browser clock; nothing is estimated.
import { Sub250Client, mintClientSecret } from "/web/sub250.js";

const $ = (id) => document.getElementById(id);
// The budget's spans, in the order of docs/LATENCY.md.
const SPANS = ["network_rtt", "gateway", "asr_finalize", "retrieval", "prompt", "prefill", "ttft", "ttft_client"];

const page = (window.sub250Page = { client: null, turns: [], clientTurns: [], truncated: [], events: 0,
                                    status: "idle" });

// --- API key: from the URL fragment the server printed (#key=...), kept for this tab only -------------
(function readKey() {
  const frag = new URLSearchParams(location.hash.slice(1));
  if (frag.get("key")) {
    sessionStorage.setItem("sub250.key", frag.get("key"));
    history.replaceState(null, "", location.pathname + location.search); // keep the key out of history
  }
  $("key").value = sessionStorage.getItem("sub250.key") || localStorage.getItem("sub250.key") || "";
  const q = new URLSearchParams(location.search);
  if (q.get("transport")) $("transport").value = q.get("transport");
})();

$("start").addEventListener("click", () => (page.client ? stop() : start()));

function setStatus(text) {
  page.status = text;
  $("status").textContent = text;
}

function showError(message) {
  $("error").hidden = false;
  $("error").textContent = message;
}

async function start() {
  $("error").hidden = true;
  const key = $("key").value.trim();
  if (key) sessionStorage.setItem("sub250.key", key); // empty: only a server run with --dev-no-auth accepts it
  $("start").disabled = true;
  setStatus("connecting…");
  try {
    const mic = await navigator.mediaDevices.getUserMedia({
      audio: { echoCancellation: true, noiseSuppression: true, autoGainControl: true, channelCount: 1 },
    });
    page.mic = mic;
    watchLevel(mic);
    const secret = await mintClientSecret(location.origin, key).catch((err) => {
      throw new Error(`${err.message} — the server prints the page's URL with its key at start-up (and keeps keys in its api_keys file)`);
    });
    const client = new Sub250Client({
      baseUrl: location.origin, token: secret.value, transport: $("transport").value, audioElement: $("remote-audio"),
    });
    page.client = client;
    client.addEventListener("event", (e) => onEvent(e.detail));
    await client.connect(mic);
    setStatus(`listening (${client.transport})`);
    $("start").textContent = "Stop";
  } catch (err) {
    showError(err.message || String(err));
    await stop();
  } finally {
    $("start").disabled = false;
  }
}

async function stop() {
  const client = page.client;
  page.client = null;
  if (client) await client.close();
  if (page.mic) { page.mic.getTracks().forEach((t) => t.stop()); page.mic = null; }
  if (page.levelTimer) { clearInterval(page.levelTimer); page.levelTimer = null; $("level").style.width = "0"; }
  if (page.levelCtx) { page.levelCtx.close().catch(() => {}); page.levelCtx = null; }
  $("start").textContent = "Start";
  setStatus("idle");
}

function watchLevel(stream) {
  const ctx = (page.levelCtx = new AudioContext());
  const analyser = ctx.createAnalyser();
  analyser.fftSize = 512;
  ctx.createMediaStreamSource(stream).connect(analyser);
  const data = new Float32Array(analyser.fftSize);
  page.levelTimer = setInterval(() => {
    analyser.getFloatTimeDomainData(data);
    let sum = 0;
    for (const v of data) sum += v * v;
    const rms = Math.sqrt(sum / data.length);
    page.micLevel = rms;
    $("level").style.width = `${Math.min(100, rms * 400)}%`;
  }, 100);
}

// --- events ------------------------------------------------------------------------------------------
let assistantEl = null;

function onEvent(ev) {
  page.events++;
  switch (ev.type) {
    case "sub250.transcript.partial":
      $("partial").textContent = ev.text;
      break;
    case "input_audio_buffer.speech_started":
      setStatus("hearing you…");
      break;
    case "input_audio_buffer.speech_stopped":
      setStatus("thinking…");
      break;
    case "conversation.item.input_audio_transcription.completed":
      $("partial").textContent = "";
      addMessage("user", ev.transcript, ev.item_id);
      break;
    case "response.created":
      $("sources").innerHTML = "";
      break;
    case "response.output_item.added": // after the caller's transcript, so the bubbles stay in order
      assistantEl = addMessage("assistant", "", ev.response_id);
      break;
    case "response.output_audio_transcript.delta":
    case "response.output_text.delta":
      if (assistantEl) assistantEl.querySelector(".text").textContent += ev.delta;
      setStatus("answering…");
      break;
    case "response.done":
      if (assistantEl && ev.response.status !== "completed") {
        assistantEl.querySelector(".who").textContent += ` (${ev.response.status})`;
      }
      setStatus(`listening (${page.client ? page.client.transport : "-"})`);
      break;
    case "conversation.item.truncated": // talked over: the server's history keeps what was heard
      page.truncated.push(ev);
      if (assistantEl) assistantEl.querySelector(".who").textContent += ` (heard ${(ev.audio_end_ms / 1000).toFixed(1)} s)`;
      break;
    case "sub250.sources":
      showSources(ev.sources);
      break;
    case "sub250.turn.latency":
      if (ev.final) { page.turns.push(ev); drawWaterfall(ev); drawSession(); }
      break;
    case "sub250.client.turn":
      page.clientTurns.push(ev);
      drawFigures();
      drawSession();
      break;
    case "error":
      showError(`${ev.error.code || ev.error.type}: ${ev.error.message}`);
      break;
  }
}

function addMessage(role, text, id) {
  const el = document.createElement("div");
  el.className = `msg ${role}`;
  el.dataset.role = role;
  el.dataset.id = id || "";
  el.innerHTML = `<span class="who">${role === "user" ? "you" : "assistant"}</span><span class="text"></span>`;
  el.querySelector(".text").textContent = text;
  $("conversation").appendChild(el);
  $("conversation").scrollTop = $("conversation").scrollHeight;
  return el;
}

function showSources(sources) {
  const ol = $("sources");
  ol.innerHTML = "";
  for (const s of sources) {
    const li = document.createElement("li");
    li.textContent = `${s.title || s.source} — ${s.source} (score ${Number(s.score).toFixed(2)})`;
    ol.appendChild(li);
  }
}

// --- the waterfall: each span of LATENCY.md as a bar on one axis, 0 = turn_commit -----------------------
function spanInterval(rep, span) {
  const m = rep.marks, s = rep.spans, c = m.turn_commit;
  const at = (k) => (m[k] === undefined ? null : m[k] - c);
  switch (span) {
    case "gateway": return s.gateway == null ? null : [-s.gateway, 0];
    case "asr_finalize": return at("asr_final") == null ? null : [0, at("asr_final")];
    case "retrieval":
      if (s.retrieval != null) return [at("retrieval_start"), at("retrieval_end")];
      return rep.beside.retrieval_ahead != null ? [-rep.beside.retrieval_ahead, 0] : null;
    case "prompt":
      if (at("prompt_ready") == null) return null;
      return [Math.max(at("asr_final") ?? 0, at("retrieval_end") ?? -Infinity), at("prompt_ready")];
    case "prefill": return at("llm_submit") == null || at("first_token") == null ? null : [at("llm_submit"), at("first_token")];
    case "ttft": return s.ttft == null ? null : [0, s.ttft];
    case "network_rtt": return s.network_rtt == null || s.ttft == null ? null : [s.ttft, s.ttft + s.network_rtt];
    case "ttft_client": return s.ttft_client == null ? null : [0, s.ttft_client];
  }
  return null;
}

function drawWaterfall(rep) {
  const rows = SPANS.map((span) => ({ span, iv: spanInterval(rep, span), value: rep.spans[span] }));
  const lo = Math.min(0, ...rows.filter((r) => r.iv).map((r) => r.iv[0]));
  const hi = Math.max(rep.budget_ms * 1.15, ...rows.filter((r) => r.iv).map((r) => r.iv[1]));
  const x = (ms) => ((ms - lo) / (hi - lo)) * 100;
  const wf = $("waterfall");
  wf.innerHTML = "";
  wf.dataset.turn = rep.turn_id;
  for (const { span, iv, value } of rows) {
    const row = document.createElement("div");
    const ceiling = span === "ttft_client" ? rep.budget_ms : rep.ceilings_ms[span];
    const over = rep.over_budget.includes(span) || (value != null && ceiling != null && value > ceiling);
    const ahead = span === "retrieval" && value == null && iv != null;
    row.className = `wf-row${over ? " over" : ""}${ahead ? " ahead" : ""}`;
    row.dataset.span = span;
    row.dataset.ms = value == null ? "" : String(value);
    const noLlm = span === "prefill" && rep.answer && !["generative", "choice"].includes(rep.answer.path);
    const shown = value != null ? `${value.toFixed(1)}` : ahead ? `ahead ${rep.beside.retrieval_ahead.toFixed(0)}`
      : noLlm ? `no LLM (${rep.answer.path})` : "—";
    row.innerHTML = `<span class="wf-name" title="ceiling ${Math.round(ceiling)} ms">${span}</span>
      <div class="wf-track"></div><span class="wf-value">${shown}</span>`;
    if (iv) {
      const bar = document.createElement("div");
      bar.className = "wf-bar";
      bar.style.left = `${x(iv[0])}%`;
      bar.style.width = `${Math.max(0.3, x(iv[1]) - x(iv[0]))}%`;
      row.querySelector(".wf-track").appendChild(bar);
    }
    wf.appendChild(row);
  }
  // the 250 ms budget line, across every track
  for (const track of wf.querySelectorAll(".wf-track")) {
    const line = document.createElement("div");
    line.className = "wf-budget";
    line.style.left = `${x(rep.budget_ms)}%`;
    track.appendChild(line);
  }
  const first = wf.querySelector(".wf-budget");
  if (first) first.innerHTML = `<span>${rep.budget_ms} ms budget</span>`;
  const axis = document.createElement("div");
  axis.className = "wf-axis";
  axis.innerHTML = `<span>ms from commit</span><div><span>${Math.round(lo)}</span><span>${Math.round(hi)}</span></div><span></span>`;
  wf.appendChild(axis);
  const verdict = $("verdict");
  verdict.textContent = rep.meets_budget ? "· within budget" : `· over budget (${rep.over_budget.join(", ")})`;
  verdict.className = rep.meets_budget ? "ok" : "over";
  drawFigures();
}

function fmt(v) { return v == null ? "—" : Number(v).toFixed(1); }

function drawFigures() {
  const rep = page.turns[page.turns.length - 1];
  if (!rep) return;
  const cl = page.clientTurns.find((t) => t.response_id === rep.response_id) || {};
  const b = rep.beside;
  $("figures").innerHTML = `
    <tr><th></th><th>server</th><th>browser (${cl.transport || "-"})</th></tr>
    <tr><td>ttft</td><td>${fmt(rep.spans.ttft)}</td><td data-fig="ttft_browser">${fmt(cl.ttftBrowserMs)}</td></tr>
    <tr><td>network_rtt</td><td>${fmt(rep.spans.network_rtt)}</td><td data-fig="rtt_browser">${fmt(cl.rttMs)}</td></tr>
    <tr><td>ttft_client</td><td>${fmt(rep.spans.ttft_client)}</td><td data-fig="ttft_client_browser">${fmt(cl.ttftClientMs)}</td></tr>
    <tr><td>first audio after speech_stopped</td><td></td><td>${fmt(cl.firstAudioBrowserMs)}</td></tr>
    <tr><td>endpoint_delay</td><td>${fmt(b.endpoint_delay)}</td><td></td></tr>
    <tr><td>voice_to_voice</td><td>${fmt(b.voice_to_voice)}</td><td></td></tr>
    <tr><td>tts_first_audio</td><td>${fmt(b.tts_first_audio)}</td><td></td></tr>
    <tr><td>tokens/s</td><td>${fmt(b.tokens_per_s)}</td><td></td></tr>
    <tr><td>reply prepared at the first pause</td><td>${rep.speculative ? "yes" : "no"}</td><td></td></tr>`;
}

function pct(values, p) {
  const v = values.filter((x) => x != null).sort((a, b) => a - b);
  if (!v.length) return null;
  const i = (p / 100) * (v.length - 1);
  const lo = Math.floor(i), hi = Math.ceil(i);
  return v[lo] + (v[hi] - v[lo]) * (i - lo);
}

function drawSession() {
  const t = page.turns;
  const rows = [
    ["ttft (server)", t.map((r) => r.spans.ttft)],
    ["ttft_client (server)", t.map((r) => r.spans.ttft_client)],
    ["ttft_client (browser)", page.clientTurns.map((c) => c.ttftClientMs)],
    ["voice_to_voice", t.map((r) => r.beside.voice_to_voice)],
  ];
  const within = t.filter((r) => r.meets_budget).length;
  $("session-stats").innerHTML = `<tr><th>${t.length} turns · ${t.length ? Math.round((within / t.length) * 100) : 0}% within budget</th><th>p50</th><th>p95</th></tr>` +
    rows.map(([name, v]) => `<tr><td>${name}</td><td>${fmt(pct(v, 50))}</td><td>${fmt(pct(v, 95))}</td></tr>`).join("");
}
