"""atheris target: Diffusion topic selectors (``subgate.topics``: parsing, matching, the index and the tree).

The input, read as UTF-8 (bad bytes replaced) and cut to the 1,024 characters an address may have, is a selector.
Contract checked: parsing raises ``SelectorError`` and nothing else; a parsed selector's ``matches``,
``may_select_within`` and ``intersects`` never raise; ``SelectorIndex.matching`` and ``TopicTree.select`` agree
with ``matches`` on a set of topic paths (the index and the tree are what the broker runs on publish and
subscribe); the cost of one parse and one round of matching is bounded by libFuzzer's per-input timeout.
"""

from __future__ import annotations

from subgate.mapping.names import MAX_NAME_LENGTH
from subgate.topics import SelectorError, SelectorIndex, TopicTree, intersects, parse_selector

INSTRUMENT = ("subgate.topics",)
MAX_LEN = 4 * MAX_NAME_LENGTH
DICTIONARY = tuple(
    word.encode()
    for word in (">", "?", "*", "#", "////", "//", "/", ".*", "(", ")", "[", "]", "+", "{2,}", "|", "\\", "(?i)",
                 "(?s:", "a/b", "$", "%")
)  # fmt: skip
_PATHS = ("a", "a/b", "a/b/c", "a/bb/c/d", "x/y", "a" * 40, "a/" * 20 + "b", "é/ü", "a.b/c-d", "a/b/c/d/e/f/g/h")
_TREE: TopicTree[None] = TopicTree()
for _path in _PATHS:
    _TREE.add(_path)
_OTHERS = tuple(parse_selector(expression) for expression in (">a/b//", "?a/.*/c", "*x/.*", "#>a////?x/y"))


def seeds() -> list[bytes]:
    texts = (">a/b", "a/b//", "?a/.*/c/", "*a/b.*//", "#>a/b////?x/.*////*a/[bc]+", "*(a|x)/.*", "?.*/(?i)B", "a/")
    return [text.encode() for text in texts]


def test_one(data: bytes) -> None:
    text = data.decode("utf-8", "replace")[:MAX_NAME_LENGTH]
    try:
        selector = parse_selector(text)
    except SelectorError:
        return
    expected = {path for path in _PATHS if selector.matches(path)}
    for path in ("", "a", "a/b", "zz/top"):
        selector.may_select_within(path)
    for other in _OTHERS:
        intersects(selector, other)
    index: SelectorIndex[int] = SelectorIndex()
    index.add(selector, 1)
    reached = {path for path in _PATHS if 1 in index.matching(path)}
    assert reached == expected, (reached, expected)
    selected = set(_TREE.select(selector))
    assert selected == expected, (selected, expected)
    assert index.remove(1) and len(index) == 0
