"""SASLprep (RFC 4013, the "SASLprep" profile of stringprep, RFC 3454) for passwords: the normalization SCRAM
(RFC 5802 section 2.2, ``Normalize``) applies before hashing, so that two spellings of the same password (a
no-break space for a space, a compatibility character for its plain form) hash alike.

Owns the mapping, NFKC normalization (Unicode 3.2, as stringprep requires), the prohibited-output and bidi checks
and the unassigned-code-point rule, with the standard library's ``stringprep`` tables. Pure; no I/O.
"""

from __future__ import annotations

import stringprep
import unicodedata

_PROHIBITED = (
    stringprep.in_table_c12,  # non-ASCII space (mapped away in step 1, so never seen here)
    stringprep.in_table_c21_c22,  # control characters
    stringprep.in_table_c3,  # private use
    stringprep.in_table_c4,  # non-character code points
    stringprep.in_table_c5,  # surrogate codes
    stringprep.in_table_c6,  # inappropriate for plain text
    stringprep.in_table_c7,  # inappropriate for canonical representation
    stringprep.in_table_c8,  # change display properties or deprecated
    stringprep.in_table_c9,  # tagging characters
)


class SaslprepError(ValueError):
    """The string holds what SASLprep prohibits (the message says which rule, never the string)."""


def saslprep(text: str, *, allow_unassigned: bool = False) -> str:
    """``text`` prepared by SASLprep. ``allow_unassigned`` is the "query" profile (RFC 3454 section 7): code
    points unassigned in Unicode 3.2 are let through; without it (the "stored string" profile) they fail.

    Raises:
        SaslprepError: a prohibited character, a bad bidi sequence or (stored strings) an unassigned code point.
    """
    # 1. map: non-ASCII spaces (C.1.2) to SPACE, "commonly mapped to nothing" (B.1) to nothing
    mapped = "".join(" " if stringprep.in_table_c12(c) else c for c in text if not stringprep.in_table_b1(c))
    # 2. normalize with Unicode 3.2's NFKC
    prepared = unicodedata.ucd_3_2_0.normalize("NFKC", mapped)
    # 3. prohibited output, and 5. unassigned code points
    for char in prepared:
        if any(table(char) for table in _PROHIBITED):
            raise SaslprepError(f"prohibited character U+{ord(char):04X}")
        if not allow_unassigned and stringprep.in_table_a1(char):
            raise SaslprepError(f"unassigned code point U+{ord(char):04X}")
    # 4. bidi: with any RandALCat character, no LCat one, and the first and last are RandALCat
    if any(stringprep.in_table_d1(c) for c in prepared):
        if any(stringprep.in_table_d2(c) for c in prepared):
            raise SaslprepError("mixes right-to-left and left-to-right characters")
        if not (stringprep.in_table_d1(prepared[0]) and stringprep.in_table_d1(prepared[-1])):
            raise SaslprepError("right-to-left text must begin and end with a right-to-left character")
    return prepared
