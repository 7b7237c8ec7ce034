"""Checks the wheels `make wheels` wrote: each platform's is there, its WHEEL file's tags
are its name's, and its native module is built for that tag's machine; the Windows one
imports only python3.dll (the stable ABI, which every CPython 3.9 and later on Windows
ships) and Windows' own DLLs, no MinGW runtime a user would not have, and exports the
function Python calls to load it. maturin has checked the Linux ones against their
policies (--auditwheel check).

    python platforms/check_wheels.py DIST
"""

from __future__ import annotations

import struct
import sys
import zipfile
from pathlib import Path

import pefile

# A wheel's platform tag, and the machine its native module is for (ELF e_machine, PE).
EXPECTED = {
    "manylinux2014_x86_64.manylinux_2_17_x86_64": ("elf", 62),
    "manylinux2014_aarch64.manylinux_2_17_aarch64": ("elf", 183),
    "musllinux_1_2_x86_64": ("elf", 62),
    "musllinux_1_2_aarch64": ("elf", 183),
    "win_amd64": ("pe", pefile.MACHINE_TYPE["IMAGE_FILE_MACHINE_AMD64"]),
}
# What the Windows module may import besides python3.dll: Windows' own libraries.
WINDOWS_DLLS = (
    *("kernel32", "ntdll", "ws2_32", "bcrypt", "advapi32", "userenv", "crypt32", "secur32"),
    *("ole32", "oleaut32", "shell32", "user32", "ncrypt", "api-ms-win-", "msvcrt", "ucrtbase"),
    *("iphlpapi", "psapi", "dbghelp", "synchronization"),
)


def machine_of(kind: str, data: bytes) -> int:
    if kind == "elf":
        assert data[:4] == b"\x7fELF", "not an ELF file"
        return struct.unpack_from("<H", data, 18)[0]
    return pefile.PE(data=data, fast_load=True).FILE_HEADER.Machine


def windows_links(data: bytes) -> tuple[list[str], list[str]]:
    """The DLLs a Windows module imports from, and the names it exports."""
    pe = pefile.PE(data=data)
    imports = sorted({entry.dll.decode().lower() for entry in pe.DIRECTORY_ENTRY_IMPORT})
    exports = getattr(pe, "DIRECTORY_ENTRY_EXPORT", None)
    names = [e.name.decode() for e in exports.symbols if e.name] if exports else []
    return imports, names


def check(wheel: Path, platform: str) -> list[str]:
    kind, machine = EXPECTED[platform]
    problems = []
    with zipfile.ZipFile(wheel) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/WHEEL"))
        tags = [line.split(": ", 1)[1] for line in z.read(meta).decode().splitlines()
                if line.startswith("Tag: ")]  # fmt: skip
        named = [f"cp39-abi3-{p}" for p in platform.split(".")]
        if sorted(tags) != sorted(named):
            problems.append(f"WHEEL says {tags}, the name {named}")
        native = [n for n in z.namelist() if n.endswith((".so", ".pyd"))]
        if len(native) != 1:
            return [*problems, f"native modules: {native}"]
        data = z.read(native[0])
        if machine_of(kind, data) != machine:
            problems.append(f"{native[0]} is for machine {machine_of(kind, data)}, not {machine}")
        if kind == "pe":
            imports, exports = windows_links(data)
            print(f"  {native[0]} imports {', '.join(imports)}; exports {len(exports)} names")
            foreign = [d for d in imports if d != "python3.dll" and not d.startswith(WINDOWS_DLLS)]
            if "python3.dll" not in imports or foreign:
                problems.append(f"imports other than python3.dll and Windows': {foreign}")
            # What Python calls to load it (a zig-linked module exported nothing: maturin#922).
            if "PyInit__blob_lock" not in exports:
                problems.append(f"PyInit__blob_lock not exported: {exports}")
    return problems


def main(dist: Path) -> int:
    failed = False
    for platform in EXPECTED:
        found = sorted(dist.glob(f"blob_lock-*-cp39-abi3-{platform}.whl"))
        problems = check(found[-1], platform) if found else ["missing"]
        print(f"{platform}: {'ok' if not problems else '; '.join(problems)}")
        failed |= bool(problems)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
