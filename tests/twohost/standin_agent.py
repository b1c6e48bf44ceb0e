"""A stand-in agent: posts real batches (one sample per interval) and spools while the
collector is unreachable, replaying in order. Boot id from a file the test controls.

    python -m tests.twohost.standin_agent URL TOKEN HOST BOOT_ID_FILE INTERVAL_S
"""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.request


def main() -> None:
    url, token, host, boot_file, interval = sys.argv[1:6]
    with open(boot_file) as f:
        boot_id = f.read().strip()
    started, seq, spool = time.time(), 0, []
    while True:
        seq += 1
        spool.append({"seq": seq, "ts": time.time(), "mem": {"MemAvailable": 2**30}})
        body = json.dumps(
            {
                "host": host,
                "boot_id": boot_id,
                "agent": {"version": "standin", "pid": os.getpid(), "started_at": started},
                "samples": spool[:500],
            }
        ).encode()
        request = urllib.request.Request(
            url + "/api/v1/ingest",
            data=body,
            method="POST",
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=2) as response:
                response.read()
            del spool[:500]
        except OSError:
            pass
        time.sleep(float(interval))


if __name__ == "__main__":
    main()
