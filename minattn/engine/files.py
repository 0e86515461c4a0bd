"""Files a run writes (an adapter, a checkpoint, its losses), written one way: under another name
in the same folder, then renamed over the file (os.replace is atomic), so that an interrupted
write leaves the last whole file or none, never half of one; created with the mode any new file
of the user's gets (0o666 less the umask: 0o644 with the usual umask 022), not a temporary
file's 0o600."""
import itertools
import os
from pathlib import Path

_written = itertools.count()


def write_replacing(path, write):
    """write(name) fills a new file at name, which is then renamed to path. The file is created
    first with os.open's 0o666, which the umask narrows, as open() does, and given that mode
    again after write (safetensors' writer leaves its files 0o600)."""
    path = Path(path)
    partial = path.with_name(f".{path.name}.{os.getpid()}-{next(_written)}.partial")
    os.close(os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
    try:
        mode = partial.stat().st_mode & 0o777
        write(str(partial))
        os.chmod(partial, mode)
        os.replace(partial, path)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
