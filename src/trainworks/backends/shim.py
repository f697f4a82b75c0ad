"""Replica supervisor: the process the server starts for each replica.

Run as `python -I -S shim.py RUN_DIR CWD GCS_ROOT ARGV...` with the replica's environment as its own (CWD and
GCS_ROOT may be empty). It leads the replica's process group, optionally gives it a private mount namespace
with the bucket root at /gcs, starts the command with its output in RUN_DIR, and writes the exit status to
RUN_DIR/exit.json, so the status survives a server restart. It imports only built-in modules (no json: its
records are written by hand) because its start-up is on every replica's start path.
"""

import os
import signal
import sys
import time

CLONE_NEWNS = 0x00020000
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18


def _write_record(path, fields, durable=True):
    """A flat JSON object of numbers, written atomically."""
    text = "{" + ", ".join(f'"{key}": {value!r}' for key, value in fields) + "}"
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, text.encode())
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def _fsync(path):
    """Best effort: the file is in place already, this only makes it survive a host crash."""
    try:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        return


def _mount_gcs(root, err):
    """A private mount namespace with the bucket root bound at /gcs, as Cloud Storage FUSE shows it."""
    import ctypes  # here, not at the top: replicas without /gcs (podman) skip its ~8 ms of CPU

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWNS) != 0:
        raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNS) failed")
    if libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None) != 0:
        raise OSError(ctypes.get_errno(), "making / private failed")
    os.makedirs("/gcs", exist_ok=True)
    if libc.mount(root.encode(), b"/gcs", None, MS_BIND | MS_REC, None) != 0:
        raise OSError(ctypes.get_errno(), f"bind-mounting {root} at /gcs failed")


def main():
    run_dir, cwd, gcs_root = sys.argv[1:4]
    argv = sys.argv[4:]
    out = os.open(os.path.join(run_dir, "stdout.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    err = os.open(os.path.join(run_dir, "stderr.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    if os.getpgid(0) != os.getpid():
        os.setsid()
    # Written before the command starts, made durable once it has (the command need not wait on the disk).
    shim_record = os.path.join(run_dir, "shim.json")
    _write_record(shim_record, [("pid", os.getpid()), ("started", time.time())], durable=False)
    if gcs_root:
        try:
            _mount_gcs(gcs_root, err)
        except OSError as exc:
            os.write(err, f"[trainworks] /gcs is not available in this replica: {exc}\n".encode())

    # The supervisor outlives signals sent to the group; the command gets default handlers after exec.
    received = []
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, lambda s, _f: received.append(s))

    child = os.fork()
    if child == 0:
        try:
            os.dup2(out, 1)
            os.dup2(err, 2)
            devnull = os.open(os.devnull, os.O_RDONLY)
            os.dup2(devnull, 0)
            if cwd:
                os.chdir(cwd)
            for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
                signal.signal(signum, signal.SIG_DFL)
            os.execvp(argv[0], argv)
        except BaseException as exc:  # noqa: BLE001 - anything here means the command never started
            os.write(2, f"[trainworks] could not start {argv[0]!r}: {exc}\n".encode())
            os._exit(127)

    _fsync(shim_record)
    wait_and_record(child, run_dir)


def wait_and_record(child, run_dir):
    """Wait for the command and write its exit record: 128+signal when a signal ended it."""
    while True:
        try:
            _, status = os.waitpid(child, 0)
            break
        except InterruptedError:
            continue
    if os.WIFSIGNALED(status):
        signum = os.WTERMSIG(status)
        record = [("exit_code", 128 + signum), ("signal", signum)]
    else:
        record = [("exit_code", os.WEXITSTATUS(status))]
    record.append(("ended", time.time()))
    _write_record(os.path.join(run_dir, "exit.json"), record)


if __name__ == "__main__":
    main()
