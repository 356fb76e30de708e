"""tests/bench/soak/attacks.py as a smoke: a few of issue 31's attacks, small, against a real server on a
repository of the attacker's own models (attacks.py --write-target), the way soak.py --attacks runs it. Each
attack must end with a known outcome (refused or absorbed: nothing unexpected, no error of the attacker's own),
the second client on its own connection (attack_victim) must see no error, the server must stay up, and the
attacks the server already refuses (NUL bytes, JSON bombs) must stay refused. The shrunk shared memory region
(attack 8) is left out here: it is the device soak's to judge.
"""

import json
import os
import subprocess
import sys

import inferd_testlib as lib

ATTACKS = os.path.join(lib.REPO_ROOT, "tests", "bench", "soak", "attacks.py")


def test_attacks_end_with_known_outcomes(tmp_path):
    repo = str(tmp_path / "repo")
    subprocess.run([sys.executable, ATTACKS, "--write-target", repo], check=True, capture_output=True, timeout=60)
    srv = lib.ServerProcess(repo, ["--model-control-mode", "explicit", "--load-model", "*",
                                   "--allow-client-shm", "true"]).start()
    try:
        kinds = "json_bomb,stalled_body,stream_noread,idle_conns,slowloris,nul_bytes,warmup_load"
        cmd = [sys.executable, ATTACKS, "--grpc", srv.grpc_url, "--http", "127.0.0.1:%d" % srv.http_port,
               "--server-pid", str(srv.proc.pid), "--kinds", kinds, "--scale", "0.02", "--hold-s", "1",
               "--pause-s", "0.5", "--warmup-entries", "50", "--bound-s", "15", "--duration-s", "30",
               "--victim-model", "attack_victim"]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        why = "exit %d\nstdout:\n%s\nstderr:\n%s" % (p.returncode, p.stdout[-4000:], p.stderr[-2000:])
        lines = [json.loads(x) for x in p.stdout.splitlines() if x.startswith("{")]
        summary = lines[-1]["summary"]
        attacks = lines[:-1]
        print("\n".join("%s %s: %s" % (a["kind"], a["outcome"], a["detail"][:150]) for a in attacks))
        assert p.returncode == 0 and not summary["unexpected"] and not summary["errors"], why
        assert not summary["server_died"] and srv.alive(), why
        assert {a["kind"] for a in attacks} == set(kinds.split(",")), why  # one cycle at least
        for a in attacks:
            assert a["outcome"] in ("refused", "absorbed"), a
            assert a["end_unix"] >= a["start_unix"], a
            assert a["victim_errors"] == 0, a  # the second client, served throughout
            if a["kind"] in ("nul_bytes", "json_bomb"):
                assert a["outcome"] == "refused", a
                assert all(c["status"] not in (None, 200) for c in a["cases"].values()), a
        assert sum(a["victim_calls"] for a in attacks) >= 20, attacks
    finally:
        srv.stop()
    assert srv.returncode == 0, srv.stderr_tail(20)
