"""The logs and history copies of the committed measurement sets, one archive a
results/<model>/<gpu>/ folder: git tracks `logs-and-history.tar.xz` there, not the files
(docs/results-format.md).

    python scripts/results_tools/results_archive.py unpack [FOLDER...] [--force]  # lay out
    python scripts/results_tools/results_archive.py pack [FOLDER...]  # a measured set added
    python scripts/results_tools/results_archive.py pack FOLDER --exact  # a set replaced

FOLDER: a results/<model>/<gpu>/ folder; by default every one under results/ that has
logs or history copies (pack) or an archive (unpack). An archive holds, with paths relative
to its folder, every file under a `logs/` or `history/` folder below it and every other
`*.log` file (a lent machine's snakemake.log), none of the build outputs (converted models,
model repositories, hidden work folders). Packing is deterministic (members sorted, fixed
time, owner and mode, xz -9e), so packing unchanged files gives the same bytes; an archive
whose bytes would not change is left as it is. Packing keeps what the archive held and
the disk lacks (a checkout that never unpacked it), the disk's copy replacing the archive's;
with --exact it holds the disk's files alone and names what it dropped (a set removed or
measured again, whose old logs and history copies must not stay beside the new ones).

Unpacking refuses a whole archive holding a member that is not a plain file (a folder
is passed over), whose path is absolute or climbs out with `..`, that lies outside a logs/
or history/ folder and is not a `*.log` file, or that would be written through a link on
disk. It keeps an existing file that differs from the archive's copy, and says so
(`--force` replaces it).
"""

from __future__ import annotations

import argparse
import io
import lzma
import os
import sys
import tarfile
from pathlib import Path, PurePosixPath

ROOT = Path(__file__).resolve().parents[2]
ARCHIVE = "logs-and-history.tar.xz"
KEPT = ("logs", "history")  # folders archived whole
LOG = ".log"  # and files of this suffix anywhere else
# build outputs (gitignored): never archived, never walked
SKIPPED = {"converted", "model_repository", "source", "export"}
MTIME = 1767225600  # 2026-01-01T00:00:00Z, every member's
MODE = 0o644
PRESET = 9 | lzma.PRESET_EXTREME


class Refused(Exception):
    """An archive that unpack will not lay out, or that pack will not rewrite."""


def is_kept(relative: str) -> bool:
    """Whether a path relative to a results/<model>/<gpu>/ folder belongs in its archive."""
    path = PurePosixPath(relative)
    return any(part in KEPT for part in path.parts[:-1]) or path.name.endswith(LOG)


def members(folder: Path) -> list[str]:
    """The files of `folder` an archive holds, as sorted POSIX paths relative to it (links
    and hidden files passed over)."""
    found = []
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = [d for d in dirnames if d not in SKIPPED and not d.startswith(".")]
        here = Path(dirpath)
        for name in filenames:
            path = here / name
            relative = path.relative_to(folder).as_posix()
            if (not name.startswith(".") and not path.is_symlink() and path.is_file()
                    and is_kept(relative)):
                found.append(relative)
    return sorted(found)


def archive_bytes(contents: dict[str, bytes]) -> bytes:
    """The archive of `contents` (relative path -> bytes), the same bytes for the same
    files."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:xz", preset=PRESET,
                      format=tarfile.PAX_FORMAT) as tar:
        for name in sorted(contents):
            data = contents[name]
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), MTIME, MODE
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _write(path: Path, data: bytes) -> None:
    """`path` whole or not at all (a temporary sibling moved onto it)."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def archived(archive: Path) -> dict[str, bytes]:
    """The plain files `archive` holds (none where there is none)."""
    if not archive.is_file():
        return {}
    with tarfile.open(archive, "r:xz") as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers()
                if m.isreg() and check_member(m) is None}


def pack(folder: Path, exact: bool = False) -> str:
    """Write `folder`'s archive where its bytes change: what it held, with the files on
    disk added or replacing theirs (a checkout that never unpacked it loses nothing), or
    with `exact` the files on disk alone; a line saying what was done."""
    archive = folder / ARCHIVE
    held = archived(archive)
    on_disk = {name: (folder / name).read_bytes() for name in members(folder)}
    if exact and held and not set(held) & set(on_disk):
        raise Refused(f"{archive}: none of its {len(held)} files is on disk (never unpacked?), "
                      "so --exact would drop them all: unpack it first")
    contents = on_disk if exact else held | on_disk
    dropped = sorted(set(held) - set(contents))
    if not contents:
        return f"{folder}: no logs or history copies to pack"
    data = archive_bytes(contents)
    if archive.is_file() and archive.read_bytes() == data:
        return f"{archive}: unchanged ({len(contents)} files)"
    _write(archive, data)
    return (f"{archive}: {len(contents)} files, {len(data):,} bytes"
            + (f"; dropped {len(dropped)}: {', '.join(dropped)}" if dropped else ""))


def check_member(member: tarfile.TarInfo) -> str | None:
    """Why unpack refuses `member`, or None."""
    path = PurePosixPath(member.name)
    if not member.isreg() and not member.isdir():
        return "not a plain file (a link, device or other special entry)"
    if path.is_absolute() or member.name.startswith(("/", "\\")):
        return "an absolute path"
    if ".." in path.parts or "\\" in member.name or not path.parts:
        return "a path that climbs out of its folder"
    if member.isreg() and not is_kept(member.name):
        return "neither under a logs/ or history/ folder nor a *.log file"
    return None


def _through_link(folder: Path, relative: str) -> Path | None:
    """The first existing path on the way from `folder` to `relative` that is a link."""
    path = folder
    for part in PurePosixPath(relative).parts:
        path = path / part
        if path.is_symlink():
            return path
    return None


def unpack(folder: Path, force: bool = False) -> list[str]:
    """Lay `folder`'s archive out under it; lines saying what was kept or replaced, and a
    count. Refused (nothing written) if any member is unsafe."""
    archive = folder / ARCHIVE
    with tarfile.open(archive, mode="r:xz") as tar:
        entries = tar.getmembers()
        problems = [f"{m.name!r}: {why}" for m in entries if (why := check_member(m))]
        problems += [f"{m.name!r}: would be written through the link {link}" for m in entries
                     if not check_member(m) and (link := _through_link(folder, m.name))]
        if problems:
            raise Refused(f"{archive}: refused, nothing unpacked:\n  " + "\n  ".join(problems))
        lines, written, same = [], 0, 0
        for member in (m for m in entries if m.isreg()):  # folders: made as files need them
            target = folder / member.name
            data = tar.extractfile(member).read()
            if target.exists():  # never a link: checked above
                if target.is_file() and target.read_bytes() == data:
                    same += 1
                    continue
                if not target.is_file():
                    lines.append(f"kept {target}: not a plain file")
                    continue
                if not force:
                    lines.append(f"kept {target}: differs from the archive's copy "
                                 "(--force replaces it)")
                    continue
                lines.append(f"replaced {target} with the archive's copy")
            target.parent.mkdir(parents=True, exist_ok=True)
            _write(target, data)
            written += 1
    kept = sum(line.startswith("kept") for line in lines)
    lines.append(f"{archive}: {written} files written, {same} already there, {kept} kept")
    return lines


def folders(results: Path, unpacking: bool) -> list[Path]:
    """Every results/<model>/<gpu>/ folder with an archive (unpacking) or with files to
    pack; the model's own logs/ (its reports' logs) is none."""
    found = []
    for model in sorted(p for p in results.iterdir() if p.is_dir()):
        for folder in sorted(p for p in model.iterdir() if p.is_dir() and p.name not in KEPT):
            if (folder / ARCHIVE).is_file() if unpacking else members(folder):
                found.append(folder)
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=["pack", "unpack"])
    parser.add_argument("folders", nargs="*", type=Path,
                        help="results/<model>/<gpu>/ folders (default: every one)")
    parser.add_argument("--results", type=Path, default=ROOT / "results",
                        help="the results tree the default folders are found in")
    parser.add_argument("--force", action="store_true",
                        help="unpack: replace a file that differs from the archive's copy")
    parser.add_argument("--exact", action="store_true",
                        help="pack: the files on disk alone, dropping the archive's others "
                             "(unpack first)")
    args = parser.parse_args(argv)
    unpacking = args.action == "unpack"
    chosen = args.folders or [Path(os.path.relpath(f)) for f in folders(args.results, unpacking)]
    refused = False
    for folder in chosen:
        if not folder.is_dir():
            print(f"{folder}: not a folder", file=sys.stderr)
            refused = True
        elif not unpacking:
            try:
                print(pack(folder, args.exact))
            except Refused as e:
                print(e, file=sys.stderr)
                refused = True
        elif not (folder / ARCHIVE).is_file():
            print(f"{folder}: no {ARCHIVE} to unpack", file=sys.stderr)
            refused = True
        else:
            try:
                print("\n".join(unpack(folder, args.force)))
            except (Refused, tarfile.TarError, lzma.LZMAError) as e:
                print(e, file=sys.stderr)
                refused = True
    return 1 if refused else 0


if __name__ == "__main__":
    sys.exit(main())
