"""The Triton-C grammar as PLY yacc rules (docstrings are the productions), building `tc_lang.ast`.

C expression precedence with the tile levels of the original between unary and `*`:
cast > range `a ... b` > matrix product `@` > `* / %` > ... (see the research notes §1.5).
Every node gets the source range of its first to last token (`loc`).
"""

from __future__ import annotations

from typing import Any

from . import ast
from .diagnostics import UNKNOWN_LOCATION, Location
from .lexer import ATTRIBUTE_KEYWORDS, scalar_of_keywords, tokens

_ASSIGN_OPS = {"=", "+=", "-=", "*=", "/=", "%=", "<<=", ">>=", "&=", "|=", "^="}
_QUALIFIERS = {"const", "restrict", "__restrict", "volatile"}


class GrammarError(Exception):
    """A construct that parses but is not valid syntax (bad type keywords, call of a non-name)."""

    def __init__(self, message: str, loc: Location, code: str = "E0203", hint: str | None = None):
        super().__init__(message)
        self.loc = loc
        self.code = code
        self.hint = hint


class SyntaxAbort(Exception):
    """Raised from p_error: the parser stopped at `token` (None at end of input)."""

    def __init__(self, token: Any, expected: list[str]) -> None:
        super().__init__("syntax error")
        self.token = token
        self.expected = expected


class _Specs:
    """Collected declaration specifiers: type keywords and qualifiers in source order."""

    def __init__(self, loc: Location) -> None:
        self.words: list[str] = []
        self.qualifiers: list[str] = []
        self.loc = loc


class _Declarator:
    def __init__(self, name: str, pointers: int, quals: list[str], dims: Any, loc: Location):
        self.name = name
        self.pointers = pointers
        self.quals = quals
        self.dims = dims
        self.loc = loc


def _loc(p: Any, i: int) -> Location:
    sym = p.slice[i]
    loc = getattr(sym, "loc", None)
    if loc is not None:
        return loc  # type: ignore[no-any-return]
    v = p[i]
    loc = getattr(v, "loc", None)
    return loc if loc is not None else UNKNOWN_LOCATION


def _join(a: Location, b: Location) -> Location:
    """The range from a to b; it keeps a's macro only if b comes from the same invocation."""
    loc = a.to(b)
    if a.macro is not None and (b.macro != a.macro or (b.line, b.col) != (a.line, a.col)):
        loc = Location(loc.file, loc.line, loc.col, loc.end_line, loc.end_col)
    return loc


def _span(p: Any, i: int, j: int) -> Location:
    return _join(_loc(p, i), _loc(p, j))


class Grammar:
    """The PLY grammar object (yacc reads `tokens`, `precedence` and the p_ methods)."""

    tokens = tokens
    start = "translation_unit"

    precedence = (
        ("nonassoc", "LOWER_THAN_ELSE"),
        ("nonassoc", "ELSE"),
        ("left", "LOR"),
        ("left", "LAND"),
        ("left", "OR"),
        ("left", "XOR"),
        ("left", "AND"),
        ("left", "EQ", "NE"),
        ("left", "GT", "GE", "LT", "LE"),
        ("left", "RSHIFT", "LSHIFT"),
        ("left", "PLUS", "MINUS"),
        ("left", "TIMES", "DIVIDE", "MOD"),
        ("left", "AT"),
        ("left", "ELLIPSIS"),
    )

    def __init__(self) -> None:
        self.parser: Any = None

    # ------------------------------------------------------------------------ top level

    def p_translation_unit_1(self, p: Any) -> None:
        """translation_unit : function_definition"""
        p[0] = [p[1]]

    def p_translation_unit_2(self, p: Any) -> None:
        """translation_unit : translation_unit function_definition"""
        p[0] = p[1] + [p[2]]

    def p_function_definition_1(self, p: Any) -> None:
        """function_definition : function_specifiers type_name ID LPAREN parameter_list RPAREN compound_statement"""
        kinds, loc = p[1]
        kind = "global" if "global" in kinds else "device" if "device" in kinds else ""
        if "global" in kinds and "device" in kinds:
            raise GrammarError(
                "a function cannot be both __global__ and __device__", loc, "E0204"
            )
        p[0] = self._function(p, kind, p[2], 3, p[5], p[7], _join(loc, p[7].loc))

    def p_function_definition_2(self, p: Any) -> None:
        """function_definition : type_name ID LPAREN parameter_list RPAREN compound_statement"""
        p[0] = self._function(p, "", p[1], 2, p[4], p[6], _span(p, 1, 6))

    def _function(
        self, p: Any, kind: str, ret: ast.TypeName, name_i: int, params: Any, body: Any, loc: Location
    ) -> ast.FunctionDef:
        if not kind:
            # No __global__/__device__ (the spec's fused-transposition kernel): a void function
            # is a kernel, anything else a helper.
            kind = "global" if ret.base.is_void and ret.pointers == 0 and ret.dims is None else "device"
        return ast.FunctionDef(
            name=p[name_i], kind=kind, return_type=ret, params=tuple(params), body=body, loc=loc
        )

    def p_function_specifiers(self, p: Any) -> None:
        """function_specifiers : function_specifier
        | function_specifiers function_specifier"""
        p[0] = (p[1][0] + p[2][0], _join(p[1][1], p[2][1])) if len(p) == 3 else p[1]

    def p_function_specifier(self, p: Any) -> None:
        """function_specifier : GLOBAL
        | DEVICE
        | INLINE
        | STATIC"""
        v = p[1]
        kinds = ["global"] if v == "__global__" else ["device"] if v == "__device__" else []
        p[0] = (kinds, _loc(p, 1))

    def p_parameter_list_1(self, p: Any) -> None:
        """parameter_list : parameter_declaration_list"""
        params = p[1]
        voids = [x for x in params if isinstance(x, Location)]
        if len(params) == 1 and voids:
            p[0] = []
        elif voids:
            raise GrammarError("'void' must be the only parameter", voids[0], "E0205")
        else:
            p[0] = params

    def p_parameter_list_2(self, p: Any) -> None:
        """parameter_list : """
        p[0] = []

    def p_parameter_declaration_list(self, p: Any) -> None:
        """parameter_declaration_list : parameter_declaration
        | parameter_declaration_list COMMA parameter_declaration"""
        p[0] = [p[1]] if len(p) == 2 else p[1] + [p[3]]

    def p_parameter_declaration_1(self, p: Any) -> None:
        """parameter_declaration : specifier_list declarator attribute_list_opt"""
        specs: _Specs = p[1]
        d: _Declarator = p[2]
        tn = self._typename(specs, d.pointers, d.quals, d.dims, _join(specs.loc, d.loc))
        loc = _join(specs.loc, d.loc)
        if p[3]:
            loc = _join(loc, p[3][-1].loc)
        p[0] = ast.Param(name=d.name, type=tn, attributes=tuple(p[3]), loc=loc)

    def p_parameter_declaration_2(self, p: Any) -> None:
        """parameter_declaration : specifier_list"""
        specs: _Specs = p[1]
        if specs.words == ["void"] and not specs.qualifiers:
            p[0] = specs.loc  # a `(void)` parameter list
        else:
            raise GrammarError("parameter needs a name", specs.loc, "E0205")

    # ------------------------------------------------------------------------ attributes

    def p_attribute_list_opt(self, p: Any) -> None:
        """attribute_list_opt : attribute_list
        | """
        p[0] = p[1] if len(p) == 2 else []

    def p_attribute_list(self, p: Any) -> None:
        """attribute_list : attribute
        | attribute_list attribute"""
        p[0] = p[1] if len(p) == 2 else p[1] + p[2]

    def p_attribute_1(self, p: Any) -> None:
        """attribute : ATTRKW"""
        p[0] = [ast.Attribute(name=ATTRIBUTE_KEYWORDS[p[1]], loc=_loc(p, 1))]

    def p_attribute_2(self, p: Any) -> None:
        """attribute : ATTRKW LPAREN assignment_expression RPAREN"""
        p[0] = [ast.Attribute(name=ATTRIBUTE_KEYWORDS[p[1]], value=p[3], loc=_span(p, 1, 4))]

    def p_attribute_3(self, p: Any) -> None:
        """attribute : ATTRIBUTE LPAREN LPAREN attribute_items RPAREN RPAREN"""
        p[0] = p[4]

    def p_attribute_items(self, p: Any) -> None:
        """attribute_items : attribute_item
        | attribute_items COMMA attribute_item"""
        p[0] = [p[1]] if len(p) == 2 else p[1] + [p[3]]

    def p_attribute_item_1(self, p: Any) -> None:
        """attribute_item : ID"""
        p[0] = ast.Attribute(name=p[1], loc=_loc(p, 1))

    def p_attribute_item_2(self, p: Any) -> None:
        """attribute_item : ID LPAREN assignment_expression RPAREN"""
        p[0] = ast.Attribute(name=p[1], value=p[3], loc=_span(p, 1, 4))

    # ------------------------------------------------------------------------ types

    def p_specifier_list_1(self, p: Any) -> None:
        """specifier_list : type_specifier
        | type_qualifier"""
        word, loc = p[1]
        specs = _Specs(loc)
        self._add_spec(specs, word)
        p[0] = specs

    def p_specifier_list_2(self, p: Any) -> None:
        """specifier_list : specifier_list type_specifier
        | specifier_list type_qualifier"""
        specs: _Specs = p[1]
        word, loc = p[2]
        specs.loc = _join(specs.loc, loc)
        self._add_spec(specs, word)
        p[0] = specs

    @staticmethod
    def _add_spec(specs: _Specs, word: str) -> None:
        if word in _QUALIFIERS:
            specs.qualifiers.append("restrict" if word == "__restrict" else word)
        else:
            specs.words.append(word)

    def p_type_specifier(self, p: Any) -> None:
        """type_specifier : VOID
        | BOOL
        | CHAR
        | SHORT
        | INT
        | LONG
        | UNSIGNED
        | SIGNED
        | TYPEKW"""
        p[0] = (p[1], _loc(p, 1))

    def p_type_qualifier(self, p: Any) -> None:
        """type_qualifier : CONST
        | RESTRICT
        | VOLATILE"""
        p[0] = (p[1], _loc(p, 1))

    def p_pointer_1(self, p: Any) -> None:
        """pointer : TIMES
        | TIMES type_qualifier_list"""
        p[0] = (1, p[2] if len(p) == 3 else [], _span(p, 1, len(p) - 1))

    def p_pointer_2(self, p: Any) -> None:
        """pointer : TIMES pointer
        | TIMES type_qualifier_list pointer"""
        inner = p[len(p) - 1]
        quals = p[2] if len(p) == 4 else []
        p[0] = (inner[0] + 1, quals + inner[1], _join(_loc(p, 1), inner[2]))

    def p_type_qualifier_list(self, p: Any) -> None:
        """type_qualifier_list : type_qualifier
        | type_qualifier_list type_qualifier"""
        q = p[len(p) - 1][0]
        q = "restrict" if q == "__restrict" else q
        p[0] = [q] if len(p) == 2 else p[1] + [q]

    def p_tile_dims(self, p: Any) -> None:
        """tile_dims : LBRACKET dim_list RBRACKET"""
        p[0] = (tuple(p[2]), _span(p, 1, 3))

    def p_dim_list(self, p: Any) -> None:
        """dim_list : conditional_expression
        | dim_list COMMA conditional_expression"""
        p[0] = [p[1]] if len(p) == 2 else p[1] + [p[3]]

    def p_type_name_1(self, p: Any) -> None:
        """type_name : specifier_list"""
        p[0] = self._typename(p[1], 0, [], None, p[1].loc)

    def p_type_name_2(self, p: Any) -> None:
        """type_name : specifier_list pointer"""
        ptr = p[2]
        p[0] = self._typename(p[1], ptr[0], ptr[1], None, _join(p[1].loc, ptr[2]))

    def p_type_name_3(self, p: Any) -> None:
        """type_name : specifier_list tile_dims"""
        dims = p[2]
        p[0] = self._typename(p[1], 0, [], dims[0], _join(p[1].loc, dims[1]))

    def p_type_name_4(self, p: Any) -> None:
        """type_name : specifier_list pointer tile_dims"""
        ptr, dims = p[2], p[3]
        p[0] = self._typename(p[1], ptr[0], ptr[1], dims[0], _join(p[1].loc, dims[1]))

    @staticmethod
    def _typename(
        specs: _Specs, pointers: int, quals: list[str], dims: Any, loc: Location
    ) -> ast.TypeName:
        base = scalar_of_keywords(specs.words)
        if base is None:
            if not specs.words:
                raise GrammarError("missing type name", specs.loc, "E0206")
            raise GrammarError(
                f"invalid type '{' '.join(specs.words)}'", specs.loc, "E0206"
            )
        return ast.TypeName(
            base=base,
            pointers=pointers,
            dims=dims,
            qualifiers=tuple(specs.qualifiers),
            pointer_qualifiers=tuple(quals),
            loc=loc,
        )

    # ------------------------------------------------------------------------ declarations

    def p_declaration(self, p: Any) -> None:
        """declaration : specifier_list init_declarator_list SEMI"""
        specs: _Specs = p[1]
        decls = []
        for d, attributes, init, loc in p[2]:
            tn = self._typename(specs, d.pointers, d.quals, d.dims, _join(specs.loc, d.loc))
            decls.append(
                ast.Decl(name=d.name, type=tn, init=init, attributes=tuple(attributes), loc=loc)
            )
        p[0] = ast.DeclStmt(decls=tuple(decls), loc=_span(p, 1, 3))

    def p_init_declarator_list(self, p: Any) -> None:
        """init_declarator_list : init_declarator
        | init_declarator_list COMMA init_declarator"""
        p[0] = [p[1]] if len(p) == 2 else p[1] + [p[3]]

    def p_init_declarator_1(self, p: Any) -> None:
        """init_declarator : declarator attribute_list_opt"""
        d = p[1]
        loc = _join(d.loc, p[2][-1].loc) if p[2] else d.loc
        p[0] = (d, p[2], None, loc)

    def p_init_declarator_2(self, p: Any) -> None:
        """init_declarator : declarator attribute_list_opt EQUALS assignment_expression"""
        d = p[1]
        p[0] = (d, p[2], p[4], _join(d.loc, p[4].loc))

    def p_declarator_1(self, p: Any) -> None:
        """declarator : ID
        | ID tile_dims"""
        dims = p[2] if len(p) == 3 else None
        loc = _join(_loc(p, 1), dims[1]) if dims else _loc(p, 1)
        p[0] = _Declarator(p[1], 0, [], dims[0] if dims else None, loc)

    def p_declarator_2(self, p: Any) -> None:
        """declarator : pointer ID
        | pointer ID tile_dims"""
        ptr = p[1]
        dims = p[3] if len(p) == 4 else None
        loc = _join(ptr[2], dims[1]) if dims else _join(ptr[2], _loc(p, 2))
        p[0] = _Declarator(p[2], ptr[0], ptr[1], dims[0] if dims else None, loc)

    # ------------------------------------------------------------------------ statements

    def p_compound_statement_1(self, p: Any) -> None:
        """compound_statement : LBRACE block_item_list RBRACE"""
        p[0] = ast.Compound(items=tuple(p[2]), loc=_span(p, 1, 3))

    def p_compound_statement_2(self, p: Any) -> None:
        """compound_statement : LBRACE RBRACE"""
        p[0] = ast.Compound(items=(), loc=_span(p, 1, 2))

    def p_block_item_list(self, p: Any) -> None:
        """block_item_list : block_item
        | block_item_list block_item"""
        p[0] = [p[1]] if len(p) == 2 else p[1] + [p[2]]

    def p_block_item(self, p: Any) -> None:
        """block_item : declaration
        | statement"""
        p[0] = p[1]

    def p_statement(self, p: Any) -> None:
        """statement : compound_statement
        | expression_statement
        | selection_statement
        | iteration_statement
        | jump_statement"""
        p[0] = p[1]

    def p_expression_statement_1(self, p: Any) -> None:
        """expression_statement : expression SEMI"""
        p[0] = ast.ExprStmt(expr=p[1], loc=_span(p, 1, 2))

    def p_expression_statement_2(self, p: Any) -> None:
        """expression_statement : SEMI"""
        p[0] = ast.ExprStmt(expr=None, loc=_loc(p, 1))

    def p_selection_statement_1(self, p: Any) -> None:
        """selection_statement : IF LPAREN expression RPAREN statement %prec LOWER_THAN_ELSE"""
        p[0] = ast.If(cond=p[3], then=p[5], loc=_span(p, 1, 5))

    def p_selection_statement_2(self, p: Any) -> None:
        """selection_statement : IF LPAREN expression RPAREN statement ELSE statement"""
        p[0] = ast.If(cond=p[3], then=p[5], otherwise=p[7], loc=_span(p, 1, 7))

    def p_iteration_statement_1(self, p: Any) -> None:
        """iteration_statement : WHILE LPAREN expression RPAREN statement"""
        p[0] = ast.While(cond=p[3], body=p[5], loc=_span(p, 1, 5))

    def p_iteration_statement_2(self, p: Any) -> None:
        """iteration_statement : DO statement WHILE LPAREN expression RPAREN SEMI"""
        p[0] = ast.DoWhile(body=p[2], cond=p[5], loc=_span(p, 1, 7))

    def p_iteration_statement_3(self, p: Any) -> None:
        """iteration_statement : FOR LPAREN expression_opt SEMI expression_opt SEMI expression_opt RPAREN statement"""
        init = ast.ExprStmt(expr=p[3], loc=_span(p, 3, 4)) if p[3] is not None else None
        p[0] = ast.For(init=init, cond=p[5], step=p[7], body=p[9], loc=_span(p, 1, 9))

    def p_iteration_statement_4(self, p: Any) -> None:
        """iteration_statement : FOR LPAREN declaration expression_opt SEMI expression_opt RPAREN statement"""
        p[0] = ast.For(init=p[3], cond=p[4], step=p[6], body=p[8], loc=_span(p, 1, 8))

    def p_jump_statement_1(self, p: Any) -> None:
        """jump_statement : BREAK SEMI"""
        p[0] = ast.Break(loc=_span(p, 1, 2))

    def p_jump_statement_2(self, p: Any) -> None:
        """jump_statement : CONTINUE SEMI"""
        p[0] = ast.Continue(loc=_span(p, 1, 2))

    def p_jump_statement_3(self, p: Any) -> None:
        """jump_statement : RETURN expression SEMI"""
        p[0] = ast.Return(value=p[2], loc=_span(p, 1, 3))

    def p_jump_statement_4(self, p: Any) -> None:
        """jump_statement : RETURN SEMI"""
        p[0] = ast.Return(loc=_span(p, 1, 2))

    # ------------------------------------------------------------------------ expressions

    def p_expression_opt(self, p: Any) -> None:
        """expression_opt : expression
        | """
        p[0] = p[1] if len(p) == 2 else None

    def p_expression_1(self, p: Any) -> None:
        """expression : assignment_expression"""
        p[0] = p[1]

    def p_expression_2(self, p: Any) -> None:
        """expression : expression COMMA assignment_expression"""
        # Flattened: `(a, b), c` means the same as `a, b, c`.
        left = p[1]
        exprs = left.exprs + (p[3],) if isinstance(left, ast.Comma) else (left, p[3])
        p[0] = ast.Comma(exprs=exprs, loc=_join(left.loc, p[3].loc))

    def p_assignment_expression_1(self, p: Any) -> None:
        """assignment_expression : conditional_expression"""
        p[0] = p[1]

    def p_assignment_expression_2(self, p: Any) -> None:
        """assignment_expression : unary_expression assignment_operator assignment_expression"""
        p[0] = ast.Assign(op=p[2], target=p[1], value=p[3], loc=_join(p[1].loc, p[3].loc))

    def p_assignment_operator(self, p: Any) -> None:
        """assignment_operator : EQUALS
        | TIMESEQUAL
        | DIVEQUAL
        | MODEQUAL
        | PLUSEQUAL
        | MINUSEQUAL
        | LSHIFTEQUAL
        | RSHIFTEQUAL
        | ANDEQUAL
        | XOREQUAL
        | OREQUAL"""
        p[0] = p[1]

    def p_conditional_expression_1(self, p: Any) -> None:
        """conditional_expression : binary_expression"""
        p[0] = p[1]

    def p_conditional_expression_2(self, p: Any) -> None:
        """conditional_expression : binary_expression CONDOP expression COLON conditional_expression"""
        p[0] = ast.Conditional(
            cond=p[1], then=p[3], otherwise=p[5], loc=_join(p[1].loc, p[5].loc)
        )

    def p_binary_expression_1(self, p: Any) -> None:
        """binary_expression : cast_expression"""
        p[0] = p[1]

    def p_binary_expression_2(self, p: Any) -> None:
        """binary_expression : binary_expression TIMES binary_expression
        | binary_expression DIVIDE binary_expression
        | binary_expression MOD binary_expression
        | binary_expression PLUS binary_expression
        | binary_expression MINUS binary_expression
        | binary_expression RSHIFT binary_expression
        | binary_expression LSHIFT binary_expression
        | binary_expression LT binary_expression
        | binary_expression LE binary_expression
        | binary_expression GE binary_expression
        | binary_expression GT binary_expression
        | binary_expression EQ binary_expression
        | binary_expression NE binary_expression
        | binary_expression AND binary_expression
        | binary_expression OR binary_expression
        | binary_expression XOR binary_expression
        | binary_expression LAND binary_expression
        | binary_expression LOR binary_expression
        | binary_expression AT binary_expression"""
        p[0] = ast.Binary(op=p[2], left=p[1], right=p[3], loc=_join(p[1].loc, p[3].loc))

    def p_binary_expression_3(self, p: Any) -> None:
        """binary_expression : binary_expression ELLIPSIS binary_expression"""
        p[0] = ast.Range(start=p[1], end=p[3], loc=_join(p[1].loc, p[3].loc))

    def p_cast_expression_1(self, p: Any) -> None:
        """cast_expression : unary_expression"""
        p[0] = p[1]

    def p_cast_expression_2(self, p: Any) -> None:
        """cast_expression : LPAREN type_name RPAREN cast_expression"""
        p[0] = ast.Cast(type=p[2], operand=p[4], loc=_join(_loc(p, 1), p[4].loc))

    def p_unary_expression_1(self, p: Any) -> None:
        """unary_expression : postfix_expression"""
        p[0] = p[1]

    def p_unary_expression_2(self, p: Any) -> None:
        """unary_expression : PLUSPLUS unary_expression
        | MINUSMINUS unary_expression"""
        op = "pre++" if p[1] == "++" else "pre--"
        p[0] = ast.Unary(op=op, operand=p[2], loc=_join(_loc(p, 1), p[2].loc))

    def p_unary_expression_3(self, p: Any) -> None:
        """unary_expression : AND cast_expression
        | PLUS cast_expression
        | MINUS cast_expression
        | NOT cast_expression
        | LNOT cast_expression
        | XOR cast_expression"""
        p[0] = ast.Unary(op=p[1], operand=p[2], loc=_join(_loc(p, 1), p[2].loc))

    def p_unary_expression_4(self, p: Any) -> None:
        """unary_expression : TIMES cast_expression"""
        p[0] = ast.Deref(pointer=p[2], loc=_join(_loc(p, 1), p[2].loc))

    def p_unary_expression_5(self, p: Any) -> None:
        """unary_expression : TIMES CONDOP LPAREN expression RPAREN cast_expression"""
        p[0] = ast.Deref(pointer=p[6], mask=p[4], loc=_join(_loc(p, 1), p[6].loc))

    def p_unary_expression_6(self, p: Any) -> None:
        """unary_expression : SIZEOF unary_expression"""
        p[0] = ast.SizeOf(operand=p[2], loc=_join(_loc(p, 1), p[2].loc))

    def p_unary_expression_7(self, p: Any) -> None:
        """unary_expression : SIZEOF LPAREN type_name RPAREN"""
        p[0] = ast.SizeOf(operand=p[3], loc=_span(p, 1, 4))

    def p_postfix_expression_1(self, p: Any) -> None:
        """postfix_expression : primary_expression"""
        p[0] = p[1]

    def p_postfix_expression_2(self, p: Any) -> None:
        """postfix_expression : postfix_expression LBRACKET subscript_list RBRACKET"""
        p[0] = ast.Subscript(base=p[1], items=tuple(p[3]), loc=_join(p[1].loc, _loc(p, 4)))

    def p_postfix_expression_3(self, p: Any) -> None:
        """postfix_expression : postfix_expression LPAREN argument_list RPAREN"""
        func = p[1]
        if not isinstance(func, ast.Name):
            raise GrammarError(
                "only named functions can be called", func.loc, "E0207",
                hint="call a built-in or a __device__ function by its name",
            )
        p[0] = ast.Call(func=func.name, args=tuple(p[3]), loc=_join(func.loc, _loc(p, 4)))

    def p_postfix_expression_4(self, p: Any) -> None:
        """postfix_expression : postfix_expression PLUSPLUS
        | postfix_expression MINUSMINUS"""
        op = "post++" if p[2] == "++" else "post--"
        p[0] = ast.Unary(op=op, operand=p[1], loc=_join(p[1].loc, _loc(p, 2)))

    def p_argument_list(self, p: Any) -> None:
        """argument_list : argument_expression_list
        | """
        p[0] = p[1] if len(p) == 2 else []

    def p_argument_expression_list(self, p: Any) -> None:
        """argument_expression_list : assignment_expression
        | argument_expression_list COMMA assignment_expression"""
        p[0] = [p[1]] if len(p) == 2 else p[1] + [p[3]]

    def p_subscript_list(self, p: Any) -> None:
        """subscript_list : subscript_item
        | subscript_list COMMA subscript_item"""
        p[0] = [p[1]] if len(p) == 2 else p[1] + [p[3]]

    def p_subscript_item_1(self, p: Any) -> None:
        """subscript_item : COLON
        | NEWAXIS
        | PLUS
        | MINUS
        | MAX
        | MIN"""
        p[0] = ast.SubscriptItem(kind=p[1], loc=_loc(p, 1))

    def p_subscript_item_2(self, p: Any) -> None:
        """subscript_item : XOR cast_expression"""
        p[0] = ast.SubscriptItem(kind="^", value=p[2], loc=_join(_loc(p, 1), p[2].loc))

    def p_primary_expression_1(self, p: Any) -> None:
        """primary_expression : ID"""
        p[0] = ast.Name(name=p[1], loc=_loc(p, 1))

    def p_primary_expression_2(self, p: Any) -> None:
        """primary_expression : INT_CONST"""
        value, suffix = parse_int(p[1], _loc(p, 1))
        p[0] = ast.IntLiteral(value=value, suffix=suffix, text=p[1], loc=_loc(p, 1))

    def p_primary_expression_3(self, p: Any) -> None:
        """primary_expression : FLOAT_CONST"""
        text = p[1]
        suffix = text[-1].lower() if text[-1] in "fFlL" else ""
        body = text[:-1] if suffix else text
        p[0] = ast.FloatLiteral(value=float(body), suffix=suffix, text=text, loc=_loc(p, 1))

    def p_primary_expression_4(self, p: Any) -> None:
        """primary_expression : CHAR_CONST"""
        p[0] = ast.IntLiteral(value=parse_char(p[1], _loc(p, 1)), loc=_loc(p, 1))

    def p_primary_expression_5(self, p: Any) -> None:
        """primary_expression : TRUE
        | FALSE"""
        p[0] = ast.BoolLiteral(value=p[1] == "true", loc=_loc(p, 1))

    def p_primary_expression_6(self, p: Any) -> None:
        """primary_expression : LPAREN expression RPAREN"""
        p[0] = p[2]

    def p_primary_expression_7(self, p: Any) -> None:
        """primary_expression : MAX LPAREN argument_list RPAREN
        | MIN LPAREN argument_list RPAREN"""
        p[0] = ast.Call(func=p[1], args=tuple(p[3]), loc=_span(p, 1, 4))

    def p_primary_expression_8(self, p: Any) -> None:
        """primary_expression : BITCAST LT type_name GT LPAREN expression RPAREN"""
        p[0] = ast.Bitcast(type=p[3], operand=p[6], loc=_span(p, 1, 7))

    def p_primary_expression_9(self, p: Any) -> None:
        """primary_expression : STRING"""
        raise GrammarError("string literals are not supported in kernels", _loc(p, 1), "E0208")

    def p_error(self, tok: Any) -> None:
        expected: list[str] = []
        parser = self.parser
        if parser is not None:
            try:
                expected = sorted(parser.action[parser.state].keys())
            except Exception:  # pragma: no cover - PLY internals changed
                expected = []
        raise SyntaxAbort(tok, expected)


def parse_int(text: str, loc: Location) -> tuple[int, str]:
    """Value and lower-case suffix of a C integer literal."""
    t = text
    suffix = ""
    while t and t[-1] in "uUlL":
        suffix = t[-1].lower() + suffix
        t = t[:-1]
    if suffix not in ("", "u", "l", "ul", "lu", "ll", "ull", "llu"):
        raise GrammarError(f"invalid integer suffix '{suffix}'", loc, "E0209")
    suffix = {"lu": "ul", "llu": "ull"}.get(suffix, suffix)
    try:
        if t[:2] in ("0x", "0X"):
            v = int(t[2:], 16)
        elif t[:2] in ("0b", "0B"):
            v = int(t[2:], 2)
        elif len(t) > 1 and t[0] == "0":
            v = int(t, 8)
        else:
            v = int(t, 10)
    except ValueError:
        raise GrammarError(f"invalid integer literal '{text}'", loc, "E0209") from None
    return v, suffix


_ESCAPES = {"n": 10, "t": 9, "r": 13, "0": 0, "\\": 92, "'": 39, '"': 34, "a": 7, "b": 8,
            "f": 12, "v": 11}


def parse_char(text: str, loc: Location) -> int:
    body = text[1:-1]
    if body.startswith("\\"):
        if body[1:] in _ESCAPES:
            return _ESCAPES[body[1:]]
        raise GrammarError(f"unknown escape sequence '{body}'", loc, "E0209")
    return ord(body)
