"""A pytest hook: with TILEOPS_FAILURES_LOG set, each failure's test id is appended to that file as it
happens, so that a run cut off by a time limit (scripts/gpu_check.sh) still names what failed; pytest's
own summary comes only at the end."""
import os


def pytest_runtest_logreport(report):
    path = os.environ.get("TILEOPS_FAILURES_LOG")
    if not path or not report.failed or os.environ.get("PYTEST_XDIST_WORKER"):
        return  # under xdist the controller receives every worker's reports
    crash = getattr(report.longrepr, "reprcrash", None)
    reason = crash.message.splitlines()[0][:200] if crash is not None and crash.message else ""
    with open(path, "a") as f:
        f.write(f"{report.nodeid} [{report.when}] {reason}\n")
