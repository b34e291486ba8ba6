#!/usr/bin/env python3
"""Lists the code points that HF `tokenizers`' NFC normalizer treats as unassigned although utf8proc (which
voltserve uses) gives them a combining class, a decomposition or a composition. HF's tables are from an older
Unicode version (about 9.0), so for these it neither reorders, composes nor decomposes; voltserve reproduces that by
normalizing the text on either side of such a code point separately (engine/tokenizer/nfc.cpp, kHfUnknownRanges).
Prints C++ initializer ranges. Usage: tools/tokenizer_nfc_compat.py
"""
import ctypes
import ctypes.util

from tokenizers import normalizers

lib = ctypes.CDLL(ctypes.util.find_library("utf8proc") or "libutf8proc.so.2")
lib.utf8proc_NFC.restype = ctypes.c_void_p
lib.utf8proc_NFC.argtypes = [ctypes.c_char_p]
libc = ctypes.CDLL(None)
libc.free.argtypes = [ctypes.c_void_p]


def u_nfc(s: str) -> str:
    p = lib.utf8proc_NFC(s.encode("utf-8"))
    out = ctypes.string_at(p).decode("utf-8")
    libc.free(p)
    return out


hf = normalizers.NFC()
# Contexts that expose a combining class (reordering against ccc 1 / 220 / 230 marks, blocking of a + U+0301) and
# a decomposition or composition (the code point alone, after a starter).
CONTEXTS = ["{c}", "a{c}\u0301", "a{c}\u0316", "a\u0316{c}", "{c}\u0334", "\u0334{c}", "a{c}", "{c}a"]
unknown = []
for cp in range(0x80, 0x110000):
    if 0xD800 <= cp <= 0xDFFF:
        continue
    c = chr(cp)
    if any(hf.normalize_str(t.format(c=c)) != u_nfc(t.format(c=c)) for t in CONTEXTS):
        unknown.append(cp)
        continue
    # Canonical compositions HF does not know: the decomposed form must come back composed in both.
    d = u_nfc(c)
    from unicodedata import normalize
    nfd = normalize("NFD", c)
    if len(nfd) > 1 and hf.normalize_str(nfd) != u_nfc(nfd):
        unknown.append(cp)
        unknown.extend(ord(x) for x in nfd[1:])
unknown = sorted(set(unknown))
ranges = []
for cp in unknown:
    if ranges and ranges[-1][1] == cp - 1:
        ranges[-1][1] = cp
    else:
        ranges.append([cp, cp])
print(f"// {len(unknown)} code points in {len(ranges)} ranges")
print(",\n".join(f"{{0x{a:X}, 0x{b:X}}}" for a, b in ranges))
