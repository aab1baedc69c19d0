"""One worker process of the pool (explorer/runtime/workers.py): its main loop, `serve`.

The pool starts each worker as a fresh interpreter running `ENTRY` (`python -c ENTRY FD`, as the "spawn"
start method does; never a fork of a server that runs threads), in a session of its own, at a lower CPU
priority (`WORKER_NICE`), so that page reruns keep the cores they need. The worker receives
(job id, name, kwargs) on the connection FD, runs the allowlisted job (explorer/runtime/jobs.py) under a
work budget that stops once the pool sends ("cancel", that id), and sends its progress and one final message.
"""
from __future__ import annotations

import os
import queue
import signal
import threading
import time
from multiprocessing import connection

from explorer.limits import work_budget
from explorer.runtime.jobs import ALL_JOBS, run_job, short

ENTRY = "import sys; from explorer.runtime.worker import serve; serve(int(sys.argv[1]))"
"""The command line a worker process runs (python -c ENTRY FD)."""
WORKER_NICE = 10
"""Workers run at this lower CPU priority: a search waits a little, a student's page rerun does not."""
PROGRESS_EVERY_S = 0.1      # a worker sends at most this many progress messages per second (and the last)


def serve(fd: int, nice: int = WORKER_NICE) -> None:
    """A worker process's main loop (started by WorkerPool as `python -c "...serve(FD)"`): receive
    (job id, name, kwargs) on the connection `fd`, run the job under a work budget that stops once the
    pool sends ("cancel", that id), send its progress and one final message. A reader thread takes the
    pool's messages, so that a cancel arrives while the job computes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)        # Ctrl-C at the server: the pool ends the workers
    try:
        os.nice(nice)
    except (AttributeError, OSError):
        pass
    conn = connection.Connection(fd)
    jobs: queue.Queue = queue.Queue()
    cancelled = [0]

    def read() -> None:
        while True:
            try:
                message = conn.recv()
            except (EOFError, OSError):
                message = None
            if message is None:
                jobs.put(None)
                return
            if message[0] == "cancel":
                cancelled[0] = message[1]
            else:
                jobs.put(message)
    threading.Thread(target=read, daemon=True).start()
    while True:
        message = jobs.get()
        if message is None:
            return
        _, job_id, name, kwargs = message
        last = [0.0]

        def progress(fraction, text, job_id=job_id):
            now = time.monotonic()
            if now - last[0] >= PROGRESS_EVERY_S or fraction >= 1.0:
                last[0] = now
                conn.send(("progress", job_id, float(fraction), short(text)))

        with work_budget(ALL_JOBS[name][1], should_stop=lambda job_id=job_id: cancelled[0] == job_id):
            state, payload = run_job(name, kwargs, progress)
        try:
            conn.send((state, job_id, payload))
        except (EOFError, OSError):
            return
        except Exception as err:        # noqa: BLE001 -- e.g. a result that cannot be sent
            conn.send(("failed", job_id, short(f"the result could not be sent back ({type(err).__name__})")))
