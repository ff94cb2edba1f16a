"""Artemis wildcard addresses (``news.#``, ``news.*.eu``) and the Diffusion topic selectors they mean.

Owns the rule (docs/jms.md, "Artemis wildcard addresses"). In Artemis an address is words joined by a delimiter
(``.``); a word ``#`` matches any sequence of zero or more words and a word ``*`` exactly one word. subgate's
topic selectors are Diffusion's, so an application moving from Artemis that subscribes to ``news.#`` would
otherwise get a plain topic of that literal name, which nothing is ever published to. Instead such an address is
either read as the equivalent Diffusion full-path selector (setting ``artemis_wildcards``) or refused with
``amqp:invalid-field`` and a description that shows the Diffusion form; it is never created as a node.

An address is an Artemis wildcard when it is not already a Diffusion selector (its first character is none of
``> ? * # $ % & <``), has no ``/`` (a Diffusion path) and one of its words is ``#`` or ``*``. A topic name in
Artemis syntax is one Diffusion path segment (``news.europe.sport``), so a word never spans a ``/``. Pure: no
proton, no store.
"""

from __future__ import annotations

import re

from subgate.mapping.errors import INVALID_FIELD, Refused

ANY_WORDS, ONE_WORD = "#", "*"
_DIFFUSION_STARTS = tuple(">?*#$%&<")


def is_wildcard(address: str, delimiter: str = ".") -> bool:
    """Is ``address`` an Artemis wildcard address (see the module docstring)?"""
    if not address or address.startswith(_DIFFUSION_STARTS) or "/" in address:
        return False
    return any(word in (ANY_WORDS, ONE_WORD) for word in address.split(delimiter))


def diffusion_selector(address: str, delimiter: str = ".") -> str:
    """The Diffusion full-path selector that selects the topics ``address`` (an Artemis wildcard) matches."""
    sep = re.escape(delimiter)
    any_char = "[^/]"
    # One word: no delimiter, no "/". Topic regexes are RE2 (topics.regex), which has no lookahead, so a
    # one-character delimiter (Artemis' is a char) is a class; a longer one keeps the lookahead and is refused.
    one_word = f"[^/{sep}]+" if len(delimiter) == 1 else f"(?:(?!{sep}){any_char})+"
    words: list[str] = []
    for word in address.split(delimiter):
        if not (word == ANY_WORDS and words and words[-1] == ANY_WORDS):  # "#.#" is "#"
            words.append(word)
    parts: list[str] = []
    last = len(words) - 1
    for i, word in enumerate(words):
        if word == ANY_WORDS:
            if i == 0 and i == last:
                parts.append(f"{any_char}*")
            elif i == last:
                parts.append(f"(?:{sep}{any_char}*)?")  # "a.#": a, a.x, a.x.y
            elif i == 0:
                parts.append(f"(?:{any_char}*{sep})?")  # "#.b": b, x.b, x.y.b
            else:
                parts.append(f"{sep}(?:{any_char}*{sep})?")  # "a.#.b": a.b, a.x.b, a.x.y.b
            continue
        token = one_word if word == ONE_WORD else re.escape(word)
        parts.append(token if i == 0 or words[i - 1] == ANY_WORDS else sep + token)
    return "*" + "".join(parts)


def check_address(address: str, *, translate: bool, delimiter: str = ".") -> str:
    """What a topic consumer's address means: the Diffusion selector for an Artemis wildcard when ``translate``
    is on, else the address unchanged.

    Raises:
        Refused: ``amqp:invalid-field`` for an Artemis wildcard while ``translate`` is off.
    """
    if not is_wildcard(address, delimiter):
        return address
    selector = diffusion_selector(address, delimiter)
    if translate:
        return selector
    raise Refused(
        INVALID_FIELD,
        f"address {address!r} is an Artemis wildcard; subgate's topic selectors are Diffusion's: subscribe to "
        f'the full-path selector "{selector}" (or start the server with artemis_wildcards = true to have '
        "it read that way)",
    )


def refuse_as_node(address: str, delimiter: str = ".") -> None:
    """A queue or a topic to publish to is never an Artemis wildcard (it would be created under that literal
    name and never match anything).

    Raises:
        Refused: ``amqp:invalid-field`` for an Artemis wildcard.
    """
    if is_wildcard(address, delimiter):
        raise Refused(
            INVALID_FIELD,
            f"address {address!r} is an Artemis wildcard: a wildcard selects topics to subscribe to (as the "
            f'Diffusion selector "{diffusion_selector(address, delimiter)}"); it cannot name a queue or a topic '
            "to publish to",
        )
