// sub250 browser client: one small ES module, no build step, no dependencies.
//
//   import { Sub250Client, mintClientSecret } from "/web/sub250.js";
//   const secret = await mintClientSecret(location.origin, apiKey);          // short-lived ek_... token
//   const client = new Sub250Client({ baseUrl: location.origin, token: secret.value, transport: "webrtc" });
//   client.addEventListener("event", (e) => console.log(e.detail));          // every server event
//   client.addEventListener("sub250.turn.latency", (e) => draw(e.detail));   // or one type
//   await client.connect(await navigator.mediaDevices.getUserMedia({ audio: true }));
//
// Transports (same JSON events either way, see docs/PROTOCOL.md):
//   "webrtc"    - SDP offer POSTed to /v1/realtime/calls; microphone on the media track; reply audio on the
//                 server's track (played by an <audio> element); events on the "oai-events" data channel.
//   "websocket" - /v1/realtime; microphone captured at 24 kHz and sent as input_audio_buffer.append;
//                 reply audio deltas scheduled on an AudioContext.
// Figures this client measures itself (browser clock), in client.stats and on each "sub250.client.turn":
//   rttMs           - WebRTC: the ICE candidate pair's currentRoundTripTime (getStats);
//                     WebSocket: the fastest of three HTTP round trips to /healthz on the same server;
//   ttftBrowserMs   - speech_stopped received -> first reply text received (both on this clock);
//   audioReceivedMs - reply audio that reached this browser (WebRTC: inbound-rtp totalSamplesReceived).

export const AUDIO_RATE = 24000;
// The sub250 events this client reads, asked for in session.include (docs/PROTOCOL.md).
export const SUB250_EVENTS = ["sub250.latency", "sub250.sources", "sub250.partials", "sub250.pauses"];

export async function mintClientSecret(baseUrl, apiKey, seconds = 600) {
  const resp = await fetch(`${baseUrl}/v1/realtime/client_secrets`, {
    method: "POST",
    headers: { Authorization: `Bearer ${apiKey}`, "Content-Type": "application/json" },
    body: JSON.stringify({ expires_after: { seconds } }),
  });
  const body = await resp.json().catch(() => ({}));
  if (!resp.ok) throw new Error(body?.error?.message || `client secret refused: HTTP ${resp.status}`);
  return body;
}

export class Sub250Client extends EventTarget {
  constructor({ baseUrl = location.origin, token, transport = "webrtc", audioElement = null } = {}) {
    super();
    this.baseUrl = baseUrl.replace(/\/$/, "");
    this.token = token;
    this.transport = transport;
    this.audioElement = audioElement;
    this.stats = { rttMs: null, audioReceivedMs: 0, ttftBrowserMs: null };
    this.connected = false;
    this._turn = null;
    this._timers = [];
    this.truncations = []; // the conversation.item.truncate events sent when the caller talked over a reply
    this.ducks = 0; // how often the reply was ducked (sub250.reply.paused)
  }

  // --- public ----------------------------------------------------------------------------------------

  async connect(micStream) {
    this.micStream = micStream;
    if (this.transport === "webrtc") await this._connectWebRTC(micStream);
    else await this._connectWebSocket(micStream);
    this.connected = true;
    // The server sends its own events (latency report, sources, partials, pauses) only to a client that asks.
    this.send({ type: "session.update", session: { type: "realtime", include: SUB250_EVENTS } });
    this._timers.push(setInterval(() => this._pollStats().catch(() => {}), 1000));
  }

  send(event) {
    const text = JSON.stringify(event);
    if (this.dc && this.dc.readyState === "open") this.dc.send(text);
    else if (this.ws && this.ws.readyState === WebSocket.OPEN) this.ws.send(text);
    else throw new Error("not connected");
  }

  async close() {
    this.connected = false;
    for (const t of this._timers) clearInterval(t);
    this._timers = [];
    if (this.pc) {
      if (this.callLocation) {
        fetch(`${this.baseUrl}${this.callLocation}/hangup`, {
          method: "POST", headers: { Authorization: `Bearer ${this.token}` },
        }).catch(() => {});
      }
      this.pc.close();
      this.pc = null;
    }
    if (this.ws) { this.ws.close(); this.ws = null; }
    if (this._capture) { this._capture.disconnect(); this._capture = null; }
    if (this.ctx) { await this.ctx.close().catch(() => {}); this.ctx = null; }
    this._emit("sub250.client.closed", { type: "sub250.client.closed" });
  }

  // --- WebRTC ----------------------------------------------------------------------------------------

  async _connectWebRTC(micStream) {
    const pc = (this.pc = new RTCPeerConnection());
    const mic = micStream.getAudioTracks();
    if (mic.length) pc.addTrack(mic[0], micStream); // one audio m-line, sendrecv: mic up, reply down
    else pc.addTransceiver("audio", { direction: "recvonly" });
    pc.ontrack = (e) => {
      this.remoteStream = e.streams[0] || new MediaStream([e.track]);
      if (this.audioElement) {
        // Chromium only decodes (and counts) received samples once the track is attached to an element.
        this.audioElement.srcObject = this.remoteStream;
        this.audioElement.play().catch(() => {});
      }
      this._emit("sub250.client.remote_track", { type: "sub250.client.remote_track" });
    };
    pc.onconnectionstatechange = () => {
      this._emit("sub250.client.connection", { type: "sub250.client.connection", state: pc.connectionState });
      if (pc.connectionState === "failed") this._emitError("the WebRTC connection failed");
    };
    const dc = (this.dc = pc.createDataChannel("oai-events"));
    dc.onmessage = (e) => this._onServerEvent(e.data);
    const opened = new Promise((resolve, reject) => {
      dc.onopen = resolve;
      setTimeout(() => reject(new Error("the data channel did not open within 15 s")), 15000);
    });
    await pc.setLocalDescription(await pc.createOffer());
    await this._iceGathered(pc);
    const resp = await fetch(`${this.baseUrl}/v1/realtime/calls`, {
      method: "POST",
      headers: { Authorization: `Bearer ${this.token}`, "Content-Type": "application/sdp" },
      body: pc.localDescription.sdp,
    });
    if (!resp.ok) {
      const body = await resp.json().catch(() => ({}));
      throw new Error(body?.error?.message || `the call was refused: HTTP ${resp.status}`);
    }
    this.callLocation = resp.headers.get("Location");
    await pc.setRemoteDescription({ type: "answer", sdp: await resp.text() });
    await opened;
  }

  _iceGathered(pc) {
    // The server answers once, without trickle ICE: send the offer with its candidates.
    if (pc.iceGatheringState === "complete") return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => { if (pc.iceGatheringState === "complete") resolve(); };
      pc.addEventListener("icegatheringstatechange", done);
      setTimeout(resolve, 2000); // whatever was gathered by then
    });
  }

  // --- WebSocket -------------------------------------------------------------------------------------

  async _connectWebSocket(micStream) {
    const url = this.baseUrl.replace(/^http/, "ws") + "/v1/realtime";
    const ws = (this.ws = new WebSocket(url, ["realtime", `openai-insecure-api-key.${this.token}`]));
    await new Promise((resolve, reject) => {
      ws.onopen = resolve;
      ws.onerror = () => reject(new Error(`cannot open ${url} (is the key valid? is the server up?)`));
    });
    ws.onmessage = (e) => this._onServerEvent(e.data);
    ws.onclose = (e) => {
      if (this.connected) this._emitError(`the WebSocket closed (${e.code} ${e.reason || ""})`);
    };
    // The AudioContext runs at the API's rate: the browser resamples the microphone for us.
    const ctx = (this.ctx = new AudioContext({ sampleRate: AUDIO_RATE }));
    this._gain = ctx.createGain(); // the reply's volume: ducked while a sound over it is checked for words
    this._gain.connect(ctx.destination);
    await ctx.resume();
    this._playHead = 0;
    this._playing = [];
    const worklet = `registerProcessor("sub250-capture", class extends AudioWorkletProcessor {
      constructor() { super(); this.buf = new Int16Array(960); this.n = 0; }
      process(inputs) {
        const ch = inputs[0][0];
        if (ch) for (let i = 0; i < ch.length; i++) {
          const s = Math.max(-1, Math.min(1, ch[i]));
          this.buf[this.n++] = s < 0 ? s * 0x8000 : s * 0x7fff;
          if (this.n === this.buf.length) { this.port.postMessage(this.buf.slice(0)); this.n = 0; }
        }
        return true;
      }
    });`;
    const moduleUrl = URL.createObjectURL(new Blob([worklet], { type: "application/javascript" }));
    await ctx.audioWorklet.addModule(moduleUrl);
    const source = ctx.createMediaStreamSource(micStream);
    const capture = (this._capture = new AudioWorkletNode(ctx, "sub250-capture"));
    capture.port.onmessage = (e) => {
      if (this.ws && this.ws.readyState === WebSocket.OPEN) {
        this.ws.send(JSON.stringify({ type: "input_audio_buffer.append", audio: b64encode(e.data.buffer) }));
      }
    };
    source.connect(capture);
    await this._measureHttpRtt();
  }

  async _measureHttpRtt() {
    let best = null;
    for (let i = 0; i < 3; i++) {
      const t0 = performance.now();
      await fetch(`${this.baseUrl}/healthz`, { cache: "no-store" }).catch(() => null);
      const dt = performance.now() - t0;
      best = best === null ? dt : Math.min(best, dt);
    }
    this.stats.rttMs = best;
  }

  _playDelta(b64, itemId) {
    const pcm = new Int16Array(b64decode(b64));
    const buf = this.ctx.createBuffer(1, pcm.length, AUDIO_RATE);
    const ch = buf.getChannelData(0);
    for (let i = 0; i < pcm.length; i++) ch[i] = pcm[i] / 32768;
    const src = this.ctx.createBufferSource();
    src.buffer = buf;
    src.connect(this._gain || this.ctx.destination);
    const at = Math.max(this.ctx.currentTime + 0.02, this._playHead);
    src.start(at);
    this._playHead = at + buf.duration;
    if (!this._heard || this._heard.itemId !== itemId) this._heard = { itemId, spans: [] };
    this._heard.spans.push([at, buf.duration]); // what of this reply item will have played, and when
    this._playing.push(src);
    src.onended = () => { this._playing = this._playing.filter((s) => s !== src); };
    this.stats.audioReceivedMs += (pcm.length / AUDIO_RATE) * 1000;
  }

  _duck(level) {
    if (this._gain && this.ctx) this._gain.gain.setTargetAtTime(level, this.ctx.currentTime, 0.02);
    if (level < 1) this.ducks += 1;
  }

  _stopPlayback() {
    for (const src of this._playing || []) { try { src.stop(); } catch (_) { /* already stopped */ } }
    this._playing = [];
    this._playHead = 0;
  }

  // The caller talked over the reply (WebSocket: this page plays it): stop, and tell the server how much was
  // heard, so that its history keeps just that (conversation.item.truncate, as in the OpenAI Realtime API).
  // On WebRTC the server plays the audio itself and knows.
  _interrupted() {
    const heard = this._heard;
    this._heard = null;
    if (heard && this.ctx) {
      const now = this.ctx.currentTime;
      let played = 0, total = 0;
      for (const [at, dur] of heard.spans) { total += dur; played += Math.min(dur, Math.max(0, now - at)); }
      if (played < total) {
        const truncate = { type: "conversation.item.truncate", item_id: heard.itemId, content_index: 0,
                           audio_end_ms: Math.floor(played * 1000) };
        this.truncations.push({ ...truncate, receivedMs: Math.round(total * 1000) });
        this.send(truncate);
      }
    }
    this._stopPlayback();
    this._duck(1); // the next reply plays at full volume
  }

  // --- events ----------------------------------------------------------------------------------------

  _onServerEvent(raw) {
    let event;
    try { event = JSON.parse(raw); } catch (_) { this._emitError("the server sent an event that is not JSON"); return; }
    const now = performance.now();
    switch (event.type) {
      case "sub250.reply.paused": // sound over the reply: words or a cough? duck it until the server knows
        this._duck(0.15);
        break;
      case "sub250.reply.resumed":
        this._duck(1);
        break;
      case "input_audio_buffer.speech_started":
        this._interrupted(); // barge-in (the server says so only for words, not a cough): stop, say what was heard
        break;
      case "input_audio_buffer.speech_stopped":
        this._turn = { speechStoppedAt: now, firstTextAt: null, firstAudioAt: null };
        break;
      case "response.output_audio_transcript.delta":
      case "response.output_text.delta":
        if (this._turn && this._turn.firstTextAt === null) {
          this._turn.firstTextAt = now;
          this.stats.ttftBrowserMs = now - this._turn.speechStoppedAt;
        }
        break;
      case "response.output_audio.delta":
        if (this.ctx) this._playDelta(event.delta, event.item_id);
        if (this._turn && this._turn.firstAudioAt === null) this._turn.firstAudioAt = now;
        break;
      case "output_audio_buffer.started":
        if (this._turn && this._turn.firstAudioAt === null) this._turn.firstAudioAt = now;
        break;
      case "sub250.turn.latency":
        if (event.final) {
          const t = this._turn || {};
          const ttft = t.firstTextAt != null && t.speechStoppedAt != null ? t.firstTextAt - t.speechStoppedAt : null;
          const v2a = t.firstAudioAt != null && t.speechStoppedAt != null ? t.firstAudioAt - t.speechStoppedAt : null;
          this._emit("sub250.client.turn", {
            type: "sub250.client.turn", response_id: event.response_id, transport: this.transport,
            rttMs: this.stats.rttMs, ttftBrowserMs: ttft,
            ttftClientMs: ttft != null && this.stats.rttMs != null ? ttft + this.stats.rttMs : null,
            firstAudioBrowserMs: v2a,
          });
        }
        break;
    }
    this._emit(event.type, event);
  }

  async _pollStats() {
    if (!this.pc) return;
    const report = await this.pc.getStats();
    report.forEach((s) => {
      if (s.type === "candidate-pair" && s.nominated && s.currentRoundTripTime !== undefined) {
        this.stats.rttMs = s.currentRoundTripTime * 1000;
      }
      if (s.type === "inbound-rtp" && s.kind === "audio" && s.totalSamplesDuration !== undefined) {
        this.stats.audioReceivedMs = s.totalSamplesDuration * 1000;
        this.stats.audioSamplesReceived = s.totalSamplesReceived;
        this.stats.audioEnergy = s.totalAudioEnergy; // > 0 only if what arrived was not silence
      }
    });
    this._emit("sub250.client.stats", { type: "sub250.client.stats", ...this.stats });
  }

  _emit(type, detail) {
    this.dispatchEvent(new CustomEvent(type, { detail }));
    this.dispatchEvent(new CustomEvent("event", { detail }));
  }

  _emitError(message) {
    this._emit("error", { type: "error", error: { type: "client_error", code: "client", message } });
  }
}

function b64encode(buffer) {
  const bytes = new Uint8Array(buffer);
  let s = "";
  for (let i = 0; i < bytes.length; i += 0x8000) s += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
  return btoa(s);
}

function b64decode(b64) {
  const s = atob(b64);
  const out = new Uint8Array(s.length);
  for (let i = 0; i < s.length; i++) out[i] = s.charCodeAt(i);
  return out.buffer;
}
