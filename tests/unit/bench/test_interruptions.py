"""The interruption benchmark's summary: a row per sound and setting, a setting being a server and the check."""

from scripts.bench.interruptions import Trial, summarize


def test_rows_per_sound_and_setting_check_on_first():
    trials = [Trial("yeah", False, "cancelled", 80.0), Trial("yeah", True, "kept"), Trial("yeah", True, "void"),
              Trial("stop", True, "cancelled", 400.0), Trial("stop", True, "cancelled", 600.0),
              Trial("stop", False, "error", detail="TimeoutError")]
    rows = summarize(trials)
    assert [(r["sound"], r["check"]) for r in rows] == [("yeah", True), ("yeah", False), ("stop", True),
                                                         ("stop", False)]
    yeah_on, _, stop_on, stop_off = rows
    assert (yeah_on["trials"], yeah_on["valid"], yeah_on["cancelled"], yeah_on["cancelled_share"]) == (2, 1, 0, 0.0)
    assert stop_on["cancelled_share"] == 1.0 and stop_on["onset_to_done_p50_ms"] == 500.0
    assert stop_on["onset_to_done_max_ms"] == 600.0
    assert (stop_off["valid"], stop_off["cancelled_share"]) == (0, None)  # an error is no valid trial


def test_two_servers_are_two_settings_in_the_order_they_ran():
    trials = [Trial("mm-hmm", True, "kept", server="cpu-base"),
              Trial("mm-hmm", True, "cancelled", 390.0, server="cpu-base-no-confidence"),
              Trial("mm-hmm", True, "cancelled", 410.0, server="cpu-base-no-confidence"),
              Trial("mm-hmm", True, "kept", server="cpu-base")]
    rows = summarize(trials)
    assert [(r["server"], r["cancelled"], r["valid"]) for r in rows] == [("cpu-base", 0, 2),
                                                                        ("cpu-base-no-confidence", 2, 2)]
