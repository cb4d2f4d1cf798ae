"""Infix source for one expression, shared by the numba and CUDA printers.

A printer subclass says how leaves, literals, calls and selections are
spelled; the tree walk, the parenthesisation and the expansion of integer
powers into products are the same for both, and match the numpy oracle.
"""

from __future__ import annotations

from ..errors import StencilforgeError
from ..ir.nodes import Access, Binary, Call, Compare, Constant, Coordinate, Expr, Literal, Negate, Power, Time, Where


class InfixPrinter:
    def literal(self, value: float) -> str:
        raise NotImplementedError

    def constant(self, node: Constant) -> str:
        return f"p_{node.name}"

    def time(self) -> str:
        return "t"

    def coordinate(self, node: Coordinate) -> str:
        raise NotImplementedError

    def access(self, node: Access) -> str:
        raise NotImplementedError

    def call(self, fn: str, args: list[str]) -> str:
        raise NotImplementedError

    def select(self, cond: str, a: str, b: str) -> str:
        raise NotImplementedError

    def __call__(self, node: Expr) -> str:
        if isinstance(node, Literal):
            return self.literal(node.value)
        if isinstance(node, Constant):
            return self.constant(node)
        if isinstance(node, Time):
            return self.time()
        if isinstance(node, Coordinate):
            return self.coordinate(node)
        if isinstance(node, Access):
            return self.access(node)
        if isinstance(node, (Binary, Compare)):
            return f"({self(node.left)} {node.op} {self(node.right)})"
        if isinstance(node, Negate):
            return f"(-{self(node.arg)})"
        if isinstance(node, Power):
            if node.n == 0:
                return self.literal(1.0)
            base = self(node.base)
            value = base
            for _ in range(abs(node.n) - 1):
                value = f"({value} * {base})"
            return f"({self.literal(1.0)} / {value})" if node.n < 0 else value
        if isinstance(node, Call):
            return self.call(node.fn, [self(a) for a in node.args])
        if isinstance(node, Where):
            return self.select(self(node.cond), self(node.a), self(node.b))
        raise StencilforgeError(f"cannot print {type(node).__name__}")
