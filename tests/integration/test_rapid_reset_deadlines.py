"""Rapid reset by deadlines (probe F7): a client that sends every call with a deadline of a few milliseconds never
waits for an answer, just as one that cancels each call at once, and frees its stream slots as fast; the guard
(server/grpc/rapid_reset.h) counts such an expiry as a cancel when the deadline was shorter than
--grpc-rapid-reset-min-deadline-ms when the call arrived. Through the real server, with the guard's limit made small
by its flag: the attacker's connection is ended (logged once for it) while a client on another connection gets
every answer; a client mixing 10 % tiny deadlines into real calls keeps its connection (the soak's whole mix:
test_rapid_reset.py); --grpc-rapid-reset-min-deadline-ms 0 leaves expiries uncounted; and calls already past their
deadline are refused before they are read. The clients are inferd-load (test_load.py's binary):
`--mix 0:0:0:100 --expire-us 1000:3000` gives every call a 1-3 ms deadline.
"""

import re
import time

import inferd_testlib as lib
from test_load import run_load
from test_rapid_reset import ended_total, kind_counts, one_connection_load

ENDED = re.compile(r"ended the connection from (ipv4:127\.0\.0\.1:\d+): its client cancelled (\d+) of the (\d+) calls "
                   r"it opened within one second \((\d+) of them by deadlines under (\d+) ms that expired\) "
                   r"\(HTTP/2 rapid reset; --grpc-rapid-reset-limit (\d+)\); (\d+) connection\(s\) ended since the last "
                   r"such line, (\d+) since start")


def attack(url, secs):
    """Every call with a 1-3 ms deadline."""
    return one_connection_load(url, secs, "--mix", "0:0:0:100", "--expire-us", "1000:3000")


def rr_lines(srv):
    return [l for l in srv.stderr_text().splitlines() if "rapid reset" in l or "rapid-reset" in l]


def test_tiny_deadlines_end_the_connection_and_others_answered(start_server):
    limit = 50
    srv = start_server(["--grpc-rapid-reset-limit", str(limit)])
    t0 = time.monotonic()
    att = attack(srv.grpc_url, 30)
    try:
        lines = srv.await_stderr(lambda ls: any(ENDED.search(l) for l in ls), timeout=60)
        m = next(ENDED.search(l) for l in lines if ENDED.search(l))
        cancels, calls, expired = int(m.group(2)), int(m.group(3)), int(m.group(4))
        assert int(m.group(5)) == 10 and int(m.group(6)) == limit, m.group(0)
        # the attacker cancels nothing itself: its calls end by their deadlines, which the server sees either
        # expire (counted as expired) or arrive as the client's own RST_STREAM when the client's clock expires them
        # first (counted as plain cancels). How many go each way is the two clocks' skew: the server's deadline
        # starts when it reads the call, milliseconds late on a loaded machine (CI's: 58 of 119 came as resets), so
        # only that some expired is held here; that the expiries are what ends such a client is held by
        # test_min_deadline_zero_leaves_expiries_uncounted, the same attack with expiries uncounted
        assert cancels >= limit and calls <= 2 * cancels and expired > 0, m.group(0)
        # a client on its own connection meanwhile: every call answered
        vic = run_load(srv.grpc_url, "-m", "mlp", "--mix", "100:0:0:0", "--request-rate-range", "100",
                       "--duration-s", "3", "--timeout-ms", "20000", "--threads", "1", timeout=120)
        assert vic.returncode == 0, vic.stderr
        valid = kind_counts(vic.stdout + vic.stderr, "valid")
        # ~300 sent by the open loop; a client short of CPU on a shared 2-core machine sends fewer on time
        assert valid.keys() == {"OK"} and valid["OK"] >= 200, vic.stdout + vic.stderr
        assert att.poll() is None, "the attack ended before the other client did: it proved nothing"
        # the attacker reconnects after its end and is ended again; awaited while it still runs (a sanitizer
        # build on a loaded machine can take seconds to cross the limit a second time)
        deadline = time.monotonic() + 60
        while ended_total(srv) < 2 and att.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        att.kill()
        att.communicate(timeout=30)
    # inferd-load reconnects after each end, and each new connection is ended in its turn; the log says so once
    # per 10 s at most (a reconnecting client would otherwise write lines as fast as it is cut off), each line
    # with the count since the one before, which add up to the total /metrics reports at that line
    ended = [ENDED.search(l) for l in rr_lines(srv)]
    assert ended and all(ended), rr_lines(srv)
    total = ended_total(srv)
    assert total >= len(ended) and total >= 2, (total, rr_lines(srv))
    assert len(ended) <= 2 + (time.monotonic() - t0) / 10, rr_lines(srv)
    assert sum(int(e.group(7)) for e in ended) == int(ended[-1].group(8)) <= total
    assert srv.stop() == 0
    srv.assert_clean_exit()


def test_min_deadline_zero_leaves_expiries_uncounted(start_server):
    srv = start_server(["--grpc-rapid-reset-limit", "50", "--grpc-rapid-reset-min-deadline-ms", "0"])
    att = attack(srv.grpc_url, 3)
    out, errs = att.communicate(timeout=120)
    text = out + errs
    assert att.returncode == 0, text
    expired = kind_counts(text, "expire")
    assert sum(expired.values()) > 3 * 50 * 2 and "UNAVAILABLE" not in expired, expired
    assert ended_total(srv) == 0 and not rr_lines(srv), rr_lines(srv)
    assert srv.stop() == 0
    srv.assert_clean_exit()


def run_mix(srv, mix, secs):
    """inferd-load's `mix` on one connection, 64 calls in flight, with the soak's timings: cancels 0-1000 us after
    sending, deadlines of the expire kind 1-500 us."""
    p = run_load(srv.grpc_url, "-m", "mlp", "--mix", mix, "--cancel-after-us", "0:1000", "--expire-us", "1:500",
                 "--concurrency-range", "64", "--threads", "1", "--connections", "1", "--duration-s", str(secs),
                 timeout=120)
    text = p.stdout + p.stderr
    assert p.returncode == 0, text
    assert "UNAVAILABLE" not in text, text
    assert kind_counts(text, "valid").keys() == {"OK"}, text
    return text


def test_a_tenth_tiny_deadlines_keeps_the_connection(start_server):
    """10 % of the calls with 1-500 us deadlines, all expiring, under a limit of 20 a second: past the count many
    times over each second, but a tenth of the calls: never cut off."""
    srv = start_server(["--grpc-rapid-reset-limit", "20"])
    text = run_mix(srv, "90:0:0:10", 4)
    expired = kind_counts(text, "expire")
    assert sum(expired.values()) > 4 * 20 * 2, expired
    assert ended_total(srv) == 0 and not rr_lines(srv), rr_lines(srv)
    assert srv.stop() == 0
    srv.assert_clean_exit()


def test_calls_past_their_deadline_are_refused_before_they_are_read(start_server):
    """A flood of calls sent with a 1 us deadline: nearly every one that reaches a CQ thread is past its deadline
    and is answered DEADLINE_EXCEEDED before its message is parsed, validated or queued (grpc_call.c), thousands
    of times here, so a sanitized run checks that path's references. The model sees almost none of them. This
    does not tell the old behaviour apart reliably: gRPC 1.51 keeps deadlines in milliseconds of a cached clock,
    so a 1 us call may arrive with up to a few ms left and is then served as any short deadline is; and calls the
    core itself drops before matching never reached inferd either way. With the guard off, one run: 17,011 of
    the 17,027 such calls that reached inferd were refused on arrival; the model saw 8 to 676 of 34-47k sent,
    against 642 of 26k before."""
    srv = start_server(["--grpc-rapid-reset-limit", "0"])
    p = run_load(srv.grpc_url, "-m", "mlp", "--mix", "0:0:0:100", "--expire-us", "1:1", "--concurrency-range", "64",
                 "--threads", "1", "--connections", "1", "--duration-s", "2", timeout=120)
    text = p.stdout + p.stderr
    assert p.returncode == 0, text
    expire = kind_counts(text, "expire")
    # every call ends DEADLINE_EXCEEDED, but for the few that gRPC's millisecond clock let arrive with time left
    # and that the model then answered in time (the docstring's caveat; 2 of 12,692 in one CI run)
    assert set(expire) <= {"DEADLINE_EXCEEDED", "OK"} and expire["DEADLINE_EXCEEDED"] > 1000, text
    assert expire.get("OK", 0) * 100 <= expire["DEADLINE_EXCEEDED"], text
    samples = lib.parse_metrics(lib.http_get(srv.http_url + "/metrics")[1])
    failed = lib.metric_sum(samples, "nv_inference_request_failure", model="mlp")
    assert failed * 10 < expire["DEADLINE_EXCEEDED"], (failed, expire)
    assert srv.stop() == 0
    srv.assert_clean_exit()
