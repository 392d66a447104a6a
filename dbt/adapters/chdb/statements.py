"""One statement per query, as a ClickHouse server enforces it.

chDB runs every statement of `set x = 1; create table ...` in one call; a
server parses a query with multi-statements disabled and refuses the second
statement with a syntax error. `second_statement_at` finds where a second
statement starts with ClickHouse's lexical rules (`tokens`: string literals,
quoted identifiers, comments, heredocs), so a `;` inside any of them is not a
separator and trailing semicolons and comments are accepted, as on a server.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_HEREDOC_TAG = re.compile(r"\$[A-Za-z0-9_]*\$")
_SNIPPET_CHARS = 160


def _skip_quoted(sql: str, i: int) -> int:
    """Index just past the literal or quoted identifier opening at sql[i]."""
    quote = sql[i]
    i += 1
    while i < len(sql):
        ch = sql[i]
        if ch == "\\":
            i += 2
            continue
        if ch == quote:
            if i + 1 < len(sql) and sql[i + 1] == quote:  # doubled quote
                i += 2
                continue
            return i + 1
        i += 1
    return i


def _skip_block_comment(sql: str, i: int) -> int:
    """Index just past the (possibly nested) /* */ comment opening at sql[i]."""
    depth = 0
    while i < len(sql):
        if sql.startswith("/*", i):
            depth += 1
            i += 2
        elif sql.startswith("*/", i):
            depth -= 1
            i += 2
            if depth == 0:
                return i
        else:
            i += 1
    return i


def _skip_ignorable(sql: str, i: int) -> int | None:
    """If sql[i] opens whitespace or a comment, the index past it; else None."""
    ch = sql[i]
    if ch.isspace():
        return i + 1
    if sql.startswith(("--", "//"), i) or (ch == "#" and sql[i + 1 : i + 2] in (" ", "!")):
        end = sql.find("\n", i)
        return len(sql) if end < 0 else end + 1
    if sql.startswith("/*", i):
        return _skip_block_comment(sql, i)
    return None


@dataclass(frozen=True)
class Token:
    """One lexical token: `space`, `comment`, `string` ('...'), `quoted` (`...` or "..."), `heredoc`, `word`
    or `other` (one character). An unterminated string, name, heredoc or comment runs to the end."""

    kind: str
    text: str

    @property
    def code(self) -> bool:
        """Not whitespace or a comment."""
        return self.kind not in ("space", "comment")

    def is_word(self, *words: str) -> bool:
        """A word equal to one of `words` (upper case), ignoring case."""
        return self.kind == "word" and self.text.upper() in words


def tokens(sql: str) -> list[Token]:
    """`sql` as tokens, by ClickHouse's lexical rules; their texts join back to `sql` exactly."""
    return list(iter_tokens(sql))


def iter_tokens(sql: str) -> Iterator[Token]:
    """`tokens`, one at a time: a reader that stops early lexes no further (raw data after `FORMAT`)."""
    i, n = 0, len(sql)
    while i < n:
        ch = sql[i]
        if ch.isspace():
            end, kind = i + 1, "space"
            while end < n and sql[end].isspace():
                end += 1
        elif (skipped := _skip_ignorable(sql, i)) is not None:
            end, kind = skipped, "comment"
        elif ch in "'\"`":
            end, kind = _skip_quoted(sql, i), "string" if ch == "'" else "quoted"
        elif ch == "$" and (tag := _HEREDOC_TAG.match(sql, i)):
            close = sql.find(tag.group(0), tag.end())
            end, kind = (n if close < 0 else close + len(tag.group(0))), "heredoc"
        elif word := _WORD.match(sql, i):
            end, kind = word.end(), "word"
        else:
            end, kind = i + 1, "other"
        yield Token(kind, sql[i:end])
        i = end


def second_statement_at(sql: str) -> int | None:
    """Index of the `;` after which a second statement starts, or None for one statement."""
    if ";" not in sql:
        return None
    toks = iter_tokens(sql)
    first_word: str | None = None
    previous_word = ""
    at = 0
    for token in toks:
        start, at = at, at + len(token.text)
        if not token.code:
            continue
        if token.text == ";":
            return start if any(t.code and t.text != ";" for t in toks) else None
        if token.kind == "word":
            text = token.text.upper()
            if first_word is None:
                first_word = text
            elif first_word == "INSERT" and previous_word == "FORMAT":
                # `INSERT ... FORMAT <name>` is followed by raw data, not SQL.
                return None
            previous_word = text
        else:
            previous_word = ""
    return None


def multi_statement_message(sql: str, at: int) -> str:
    """The error a ClickHouse server returns for `sql` with a second statement after sql[at]."""
    where = f"failed at position {at + 1} (end of query)"
    if "\n" in sql:
        line = sql.count("\n", 0, at) + 1
        col = at - (sql.rfind("\n", 0, at) + 1) + 1
        where += f" (line {line}, col {col})"
    rest = sql[at:]
    snippet = rest[:_SNIPPET_CHARS] + "..." if len(rest) > _SNIPPET_CHARS else rest + "."
    return (
        f"Code: 62. DB::Exception: Syntax error (Multi-statements are not allowed): {where}: {snippet} "
        "(SYNTAX_ERROR). type: chdb refuses what a ClickHouse server refuses: send one statement per query "
        "(e.g. one hook or one `statement` call each)."
    )
