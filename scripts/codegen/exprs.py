"""Small expression language of manifests: shape specs, shape rules and roofline formulas.

  shape  := 'same_as(' NAME ')' | 'any' | 'broadcast_shapes(' NAME (',' NAME)* ')'
          | '[' dim (',' dim)* ']' | '[]'      ('...' at most once, the first or the last dim)
          | ('reduce' | 'reduce_listed') '(' NAME ',' NAME [',' NAME] ')'
          | 'along(' NAME ',' INT ')'
          | 'pool(' NAME ',' NAME ',' NAME ',' NAME ',' (NAME | '1') ',' NAME ')'
          | 'adaptive_pool(' NAME ',' NAME ')'
          | 'conv(' NAME ',' NAME ',' NAME ',' NAME ',' NAME [',' NAME] ')'
  dim    := '...' | '*' NAME | expr
  rule   := cond ('or' cond)*
  cond   := expr CMP expr | ['not'] 'given(' NAME ')' | ['not'] NAME | NAME ('=='|'!=') STRING
            CMP in == != <= >= < >  (given(): a nullable param or an optional input is there; a bare
            NAME: a bool param; NAME == 'text': a str param's value, so `layout != '1d' or ndim(x) == 2`
            ties a rank to a layout)
  expr   := term (('+'|'-') term)*
  term   := atom (('*'|'//'|'%') atom)*
  atom   := INT | NAME | NAME '(' expr (',' expr)* ')' | '(' expr ')'

Functions: len(int[] param), prod(int[] param), ndim(tensor), numel(tensor), elem_size(tensor),
select(bool param, expr, expr) (the first expr when the param is true: GEMM's transpose flags),
is_pow2(expr) (1 when the value is a power of two, else 0: FFTC2CFwdOp's radix-2 size) and
ilog2(expr) (floor(log2(value)) for a value >= 1, else 0: an FFT's roofline).
Values are immutable records; nothing here knows about C++.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

INT_FUNCTIONS = {"is_pow2", "ilog2"}  # of one int expression
FUNCTIONS = {"len", "prod", "ndim", "numel", "elem_size", "select"} | INT_FUNCTIONS
COMPARISONS = ("==", "!=", "<=", ">=", "<", ">")


class ExprError(ValueError):
    pass


@dataclass(frozen=True)
class Num:
    value: int


@dataclass(frozen=True)
class Name:
    id: str


@dataclass(frozen=True)
class Call:
    fn: str
    args: tuple


@dataclass(frozen=True)
class Bin:
    op: str
    lhs: object
    rhs: object


@dataclass(frozen=True)
class Cmp:
    op: str
    lhs: object
    rhs: object


@dataclass(frozen=True)
class Given:
    """A nullable param is not None, or an optional input is there."""
    param: str


@dataclass(frozen=True)
class Flag:
    """A bool param is true."""
    param: str


@dataclass(frozen=True)
class Not:
    """The negation of a Given or a Flag."""
    cond: object


@dataclass(frozen=True)
class Or:
    """A rule that holds when any of its conditions does."""
    conds: tuple


@dataclass(frozen=True)
class Ellipsis_:
    pass


@dataclass(frozen=True)
class Splice:
    param: str


@dataclass(frozen=True)
class ShapeList:
    dims: tuple  # of Ellipsis_ | Splice | expr


@dataclass(frozen=True)
class SameAs:
    input: str


@dataclass(frozen=True)
class Reduced:
    """The shape of `input` with the dims named by param `dim` removed (kept as 1 when the bool param
    `keepdim` is true). `dim` None reduces every dim; an empty list does too, unless `listed` (then
    it reduces none, as torch.all/any do)."""
    input: str
    dim: str
    keepdim: str | None
    listed: bool = False


@dataclass(frozen=True)
class AnyShape:
    """An input of any shape, rank 0 included (elementwise inputs that broadcast)."""


@dataclass(frozen=True)
class Along:
    """A 0-dim or 1-D input of 1 or input.size(dim) elements, broadcast along that dim of `input`
    (torch.nn.functional.prelu's weight: along(input, 1))."""
    input: str
    dim: int


@dataclass(frozen=True)
class Pooled:
    """torch's pooling output shape: `input`'s leading dims (batch, channels), then per spatial dim
    (as many as `kernel`'s int[N] type says) (L + 2p - d(k - 1) - 1 + (s - 1 if ceil_mode)) // s + 1,
    less one when ceil_mode puts the last window's start past the input and its left padding.
    `stride` (int[N]?: None or [] = kernel), `dilation` None = 1. One-element lists stand for all dims."""
    input: str
    kernel: str
    stride: str
    padding: str
    dilation: str | None
    ceil_mode: str


@dataclass(frozen=True)
class AdaptivePooled:
    """`input`'s leading dims, then the `output_size` int[N] param (adaptive pooling)."""
    input: str
    output_size: str


@dataclass(frozen=True)
class Convolved:
    """torch's convolution output shape: `input`'s batch dim (none when unbatched), `weight`'s first
    dim (output channels), then per spatial dim (as many as the int[N] params say)
    (L + 2p - d(k - 1) - 1) // s + 1, k the matching trailing dim of `weight`; L itself when the str?
    param `padding_str` is 'same'. One-element lists stand for all dims."""
    input: str
    weight: str
    stride: str
    padding: str
    dilation: str
    padding_str: str | None


@dataclass(frozen=True)
class StrIs:
    """A str param's value compared with a literal (== or !=)."""
    param: str
    op: str
    value: str


@dataclass(frozen=True)
class Broadcast:
    """The broadcast of the named inputs' shapes (torch.broadcast_shapes)."""
    inputs: tuple


_TOKEN = re.compile(r"\s*(?:(\d+)|([A-Za-z_][A-Za-z_0-9]*)|(\.\.\.|//|==|!=|<=|>=|[-+*%<>(),\[\]])|('[^']*'))")


def _tokens(text: str) -> list[str]:
    out, pos = [], 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise ExprError(f"cannot read '{text[pos:].strip()}' in '{text}'")
        out.append(m.group(m.lastindex))
        pos = m.end()
    return out


class _Parser:
    def __init__(self, text: str):
        self.text, self.toks, self.i = text, _tokens(text), 0

    def peek(self):
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self, expected=None):
        tok = self.peek()
        if tok is None or (expected is not None and tok != expected):
            want = f"'{expected}'" if expected else "more"
            raise ExprError(f"expected {want} in '{self.text}', got {tok!r}")
        self.i += 1
        return tok

    def done(self):
        if self.peek() is not None:
            raise ExprError(f"unexpected '{self.peek()}' in '{self.text}'")

    def expr(self):
        node = self.term()
        while self.peek() in ("+", "-"):
            op = self.take()
            node = Bin(op, node, self.term())
        return node

    def term(self):
        node = self.atom()
        while self.peek() in ("*", "//", "%"):
            op = self.take()
            node = Bin(op, node, self.atom())
        return node

    def atom(self):
        tok = self.take()
        if tok.isdigit():
            return Num(int(tok))
        if tok == "(":
            node = self.expr()
            self.take(")")
            return node
        if re.fullmatch(r"[A-Za-z_]\w*", tok):
            if self.peek() == "(":
                if tok not in FUNCTIONS:
                    raise ExprError(f"unknown function '{tok}' in '{self.text}' (known: {sorted(FUNCTIONS)})")
                self.take("(")
                args = [self.expr()]
                while self.peek() == ",":
                    self.take(",")
                    args.append(self.expr())
                self.take(")")
                return Call(tok, tuple(args))
            return Name(tok)
        raise ExprError(f"unexpected '{tok}' in '{self.text}'")


def parse_expr(text: str):
    p = _Parser(str(text))
    node = p.expr()
    p.done()
    return node


def _cond(p: _Parser, text: str):
    if p.peek() == "not":
        p.take()
        inner = _cond(p, text)
        if not isinstance(inner, (Given, Flag)):
            raise ExprError(f"'not' negates given(<name>) or a bool param: '{text}'")
        return Not(inner)
    if p.peek() == "given" and p.i + 1 < len(p.toks) and p.toks[p.i + 1] == "(":
        p.take()
        p.take("(")
        name = p.take()
        if not re.fullmatch(r"[A-Za-z_]\w*", name):
            raise ExprError(f"given() takes a param or input name: '{text}'")
        p.take(")")
        return Given(name)
    if (p.i + 2 < len(p.toks) and p.toks[p.i + 1] in ("==", "!=") and p.toks[p.i + 2].startswith("'")
            and re.fullmatch(r"[A-Za-z_]\w*", p.peek())):
        name, op, value = p.take(), p.take(), p.take()
        return StrIs(name, op, value[1:-1])
    lhs = p.expr()
    op = p.peek()
    if isinstance(lhs, Name) and op in (None, "or"):
        return Flag(lhs.id)
    if op not in COMPARISONS:
        raise ExprError(f"a rule compares two expressions with one of {' '.join(COMPARISONS)}, or is "
                        f"[not] given(<name>) or [not] <bool param>, joined by 'or': '{text}'")
    p.take()
    return Cmp(op, lhs, p.expr())


def parse_rule(text: str):
    p = _Parser(str(text))
    conds = [_cond(p, text)]
    while p.peek() == "or":
        p.take()
        conds.append(_cond(p, text))
    p.done()
    return conds[0] if len(conds) == 1 else Or(tuple(conds))


def parse_shape(text: str):
    text = str(text).strip()
    m = re.fullmatch(r"same_as\(\s*([A-Za-z_]\w*)\s*\)", text)
    if m:
        return SameAs(m.group(1))
    m = re.fullmatch(r"(reduce|reduce_listed)\(\s*([A-Za-z_]\w*)\s*,\s*([A-Za-z_]\w*)\s*(?:,\s*([A-Za-z_]\w*)\s*)?\)", text)
    if m:
        return Reduced(m.group(2), m.group(3), m.group(4), m.group(1) == "reduce_listed")
    if text.startswith("reduce"):
        raise ExprError(f"a reduced shape is reduce(<input>, <dim param>[, <keepdim param>]) or reduce_listed(...): '{text}'")
    if text == "any":
        return AnyShape()
    m = re.fullmatch(r"pool\(([^()]*)\)", text)
    if m:
        args = [a.strip() for a in m.group(1).split(",")]
        if len(args) != 6 or not all(re.fullmatch(r"[A-Za-z_]\w*", a) for i, a in enumerate(args) if i != 4) \
                or not re.fullmatch(r"[A-Za-z_]\w*|1", args[4]):
            raise ExprError("a pooled shape is pool(<input>, <kernel_size>, <stride>, <padding>, <dilation> | 1, "
                            f"<ceil_mode>): '{text}'")
        return Pooled(args[0], args[1], args[2], args[3], None if args[4] == "1" else args[4], args[5])
    if text.startswith("pool"):
        raise ExprError(f"a pooled shape is pool(<input>, <kernel_size>, <stride>, <padding>, <dilation> | 1, "
                        f"<ceil_mode>): '{text}'")
    m = re.fullmatch(r"conv\(([^()]*)\)", text)
    if m:
        args = [a.strip() for a in m.group(1).split(",")]
        if len(args) not in (5, 6) or not all(re.fullmatch(r"[A-Za-z_]\w*", a) for a in args):
            raise ExprError("a convolved shape is conv(<input>, <weight>, <stride>, <padding>, <dilation>"
                            f"[, <padding_str>]): '{text}'")
        return Convolved(*args[:5], args[5] if len(args) == 6 else None)
    if text.startswith("conv"):
        raise ExprError("a convolved shape is conv(<input>, <weight>, <stride>, <padding>, <dilation>"
                        f"[, <padding_str>]): '{text}'")
    m = re.fullmatch(r"adaptive_pool\(\s*([A-Za-z_]\w*)\s*,\s*([A-Za-z_]\w*)\s*\)", text)
    if m:
        return AdaptivePooled(m.group(1), m.group(2))
    if text.startswith("adaptive_pool"):
        raise ExprError(f"an adaptive pooled shape is adaptive_pool(<input>, <output_size>): '{text}'")
    m = re.fullmatch(r"along\(\s*([A-Za-z_]\w*)\s*,\s*(\d+)\s*\)", text)
    if m:
        return Along(m.group(1), int(m.group(2)))
    if text.startswith("along"):
        raise ExprError(f"along() takes an input name and a dim: along(<input>, <dim>): '{text}'")
    m = re.fullmatch(r"broadcast_shapes\(([^()]*)\)", text)
    if m:
        names = tuple(n.strip() for n in m.group(1).split(","))
        if not all(re.fullmatch(r"[A-Za-z_]\w*", n) for n in names):
            raise ExprError(f"broadcast_shapes() takes input names: '{text}'")
        return Broadcast(names)
    p = _Parser(text)
    p.take("[")
    dims = []
    if p.peek() != "]":
        while True:
            if p.peek() == "...":
                p.take()
                dims.append(Ellipsis_())
            elif p.peek() == "*":
                p.take()
                name = p.take()
                if not re.fullmatch(r"[A-Za-z_]\w*", name):
                    raise ExprError(f"'*' must be followed by an int[] param name in '{text}'")
                dims.append(Splice(name))
            else:
                dims.append(p.expr())
            if p.peek() == ",":
                p.take()
                continue
            break
    p.take("]")
    p.done()
    if sum(isinstance(d, Ellipsis_) for d in dims) > 1:
        raise ExprError(f"at most one '...' per shape: '{text}'")
    if any(isinstance(d, Ellipsis_) for d in dims[1:-1]):
        raise ExprError(f"'...' must be the first or the last dim: '{text}'")
    return ShapeList(tuple(dims))


def select_flags(node) -> set[str]:
    """The bool params that select() calls in an expression choose by."""
    if isinstance(node, Call):
        own = {node.args[0].id} if node.fn == "select" and node.args and isinstance(node.args[0], Name) else set()
        return own.union(*(select_flags(a) for a in node.args))
    if isinstance(node, (Bin, Cmp)):
        return select_flags(node.lhs) | select_flags(node.rhs)
    return set()


def names_in(node) -> set[str]:
    """Every bare name an expression mentions (function arguments included)."""
    if isinstance(node, Name):
        return {node.id}
    if isinstance(node, Call):
        return set().union(*(names_in(a) for a in node.args))
    if isinstance(node, (Bin, Cmp)):
        return names_in(node.lhs) | names_in(node.rhs)
    if isinstance(node, (Given, Flag, StrIs)):
        return {node.param}
    if isinstance(node, Not):
        return names_in(node.cond)
    if isinstance(node, Or):
        return set().union(*(names_in(c) for c in node.conds))
    return set()


_PREC = {"+": 1, "-": 1, "*": 2, "//": 2, "%": 2}


def render(node) -> str:
    """Back to manifest text (for error messages and docs)."""
    if isinstance(node, Num):
        return str(node.value)
    if isinstance(node, Name):
        return node.id
    if isinstance(node, Call):
        return f"{node.fn}({', '.join(render(a) for a in node.args)})"
    if isinstance(node, Bin):
        prec = _PREC[node.op]
        lhs = render(node.lhs)
        rhs = render(node.rhs)
        if isinstance(node.lhs, Bin) and _PREC[node.lhs.op] < prec:
            lhs = f"({lhs})"
        if isinstance(node.rhs, Bin) and _PREC[node.rhs.op] <= prec:
            rhs = f"({rhs})"
        return f"{lhs} {node.op} {rhs}"
    if isinstance(node, Cmp):
        return f"{render(node.lhs)} {node.op} {render(node.rhs)}"
    if isinstance(node, Given):
        return f"given({node.param})"
    if isinstance(node, Flag):
        return node.param
    if isinstance(node, StrIs):
        return f"{node.param} {node.op} '{node.value}'"
    if isinstance(node, Not):
        return f"not {render(node.cond)}"
    if isinstance(node, Pooled):
        return (f"pool({node.input}, {node.kernel}, {node.stride}, {node.padding}, {node.dilation or 1}, "
                f"{node.ceil_mode})")
    if isinstance(node, AdaptivePooled):
        return f"adaptive_pool({node.input}, {node.output_size})"
    if isinstance(node, Convolved):
        tail = f", {node.padding_str}" if node.padding_str else ""
        return f"conv({node.input}, {node.weight}, {node.stride}, {node.padding}, {node.dilation}{tail})"
    if isinstance(node, Or):
        return " or ".join(render(c) for c in node.conds)
    if isinstance(node, Along):
        return f"along({node.input}, {node.dim})"
    if isinstance(node, Ellipsis_):
        return "..."
    if isinstance(node, Splice):
        return f"*{node.param}"
    if isinstance(node, ShapeList):
        return "[" + ", ".join(render(d) for d in node.dims) + "]"
    if isinstance(node, SameAs):
        return f"same_as({node.input})"
    if isinstance(node, Reduced):
        args = ", ".join([node.input, node.dim] + ([node.keepdim] if node.keepdim else []))
        return f"{'reduce_listed' if node.listed else 'reduce'}({args})"
    if isinstance(node, AnyShape):
        return "any"
    if isinstance(node, Broadcast):
        return f"broadcast_shapes({', '.join(node.inputs)})"
    raise TypeError(node)
