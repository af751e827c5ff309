//! The element-wise expressions python-blosc2 stores for CTable computed columns
//! (`"(o0 * o1)"`, `"(where(o0 > 2, o0 ** 2, sqrt(o0)))"`): NumPy / numexpr syntax, which
//! is Python's, parsed into an [`Expression`] tree with Python's precedence. Names are
//! kept as written (`o0`, `o1`, … stand for the column's `col_deps`); what they and the
//! functions mean is the caller's business. Nothing here evaluates anything.

use std::fmt;

/// A parsed expression.
#[derive(Debug, Clone, PartialEq)]
pub enum Expression {
    /// A name: an operand (`o0`) or a column.
    Name(String),
    /// An integer literal.
    Int(i64),
    /// A float literal.
    Float(f64),
    /// `True` / `False`.
    Bool(bool),
    /// A string literal (`'abc'` or `"abc"`).
    Str(String),
    /// A unary operator applied to an operand.
    Unary(UnaryOp, Box<Expression>),
    /// A binary operator.
    Binary(BinaryOp, Box<Expression>, Box<Expression>),
    /// A function call: its name and arguments.
    Call(String, Vec<Expression>),
}

/// Unary operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnaryOp {
    /// `-x`
    Neg,
    /// `+x`
    Pos,
    /// `~x`: logical not of booleans, bitwise not of integers.
    Invert,
}

/// Binary operators, from Python's lowest precedence to its highest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `==`
    Eq,
    /// `!=`
    Ne,
    /// `|`: logical or of booleans, bitwise or of integers.
    Or,
    /// `^`
    Xor,
    /// `&`
    And,
    /// `<<`
    Shl,
    /// `>>`
    Shr,
    /// `+`
    Add,
    /// `-`
    Sub,
    /// `*`
    Mul,
    /// `/` (true division: integers give floats)
    Div,
    /// `//` (floor division)
    FloorDiv,
    /// `%` (the result takes the divisor's sign)
    Mod,
    /// `**`
    Pow,
}

impl BinaryOp {
    /// Whether it is one of the six comparisons.
    pub fn is_comparison(self) -> bool {
        use BinaryOp as B;
        matches!(self, B::Lt | B::Le | B::Gt | B::Ge | B::Eq | B::Ne)
    }
}

/// Why an expression did not parse: the message and the byte offset it refers to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    /// What was wrong.
    pub message: String,
    /// Byte offset in the expression.
    pub at: usize,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (at byte {})", self.message, self.at)
    }
}

/// Nesting deeper than this (parentheses, calls, unary operators) is refused, so a
/// hostile expression cannot exhaust the stack.
const MAX_DEPTH: usize = 64;

/// A tree deeper than this is refused: a chain of operators (`a + a + … + a`) nests
/// one level per operator without any parenthesis, and every walk over the tree (and
/// dropping it) recurses once per level.
const MAX_TREE_DEPTH: usize = 256;

/// The depth of `e`'s tree (a leaf is 1). Recursive: called on trees the parser has
/// bounded.
fn tree_depth(e: &Expression) -> usize {
    1 + match e {
        Expression::Unary(_, x) => tree_depth(x),
        Expression::Binary(_, a, b) => tree_depth(a).max(tree_depth(b)),
        Expression::Call(_, args) => args.iter().map(tree_depth).max().unwrap_or(0),
        _ => 0,
    }
}

/// Parses `text`.
///
/// # Errors
/// Syntax Python would reject, chained comparisons (`a < b < c`), keywords (`and`, `or`,
/// `not`, `if`, `lambda`), attribute access, subscripts, nesting deeper than 64 and trees
/// deeper than 256 (e.g. a chain of more than 255 operators).
pub fn parse(text: &str) -> Result<Expression, ParseError> {
    let tokens = tokenize(text)?;
    let mut p = Parser {
        tokens,
        pos: 0,
        depth: 0,
    };
    let e = p.comparison()?;
    match p.peek() {
        Token::End => Ok(e),
        t => Err(p.error(format!("unexpected {t:?} after the expression"))),
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Name(String),
    Int(i64),
    Float(f64),
    Str(String),
    Op(&'static str),
    Open,
    Close,
    Comma,
    End,
}

/// Operators, longest first so that `**` is not read as two `*`.
const OPERATORS: [&str; 18] = [
    "**", "//", "<<", ">>", "<=", ">=", "==", "!=", "<", ">", "+", "-", "*", "/", "%", "&", "|",
    "^",
];

fn tokenize(text: &str) -> Result<Vec<(Token, usize)>, ParseError> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    let err = |message: String, at: usize| ParseError { message, at };
    while i < b.len() {
        let c = b[i];
        let start = i;
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        if c.is_ascii_alphabetic() || c == b'_' {
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            out.push((Token::Name(text[start..i].to_string()), start));
        } else if c.is_ascii_digit() || (c == b'.' && b.get(i + 1).is_some_and(u8::is_ascii_digit))
        {
            let mut float = false;
            while i < b.len() && (b[i].is_ascii_digit() || b[i] == b'.' || b[i] == b'_') {
                float |= b[i] == b'.';
                i += 1;
            }
            if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
                float = true;
                i += 1;
                if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
                    i += 1;
                }
                while i < b.len() && b[i].is_ascii_digit() {
                    i += 1;
                }
            }
            if i < b.len() && (b[i].is_ascii_alphabetic() || b[i] == b'_') {
                return Err(err(format!("a number runs into {:?}", b[i] as char), start));
            }
            let digits = text[start..i].replace('_', "");
            let token = if float {
                digits.parse().map(Token::Float).ok()
            } else {
                digits.parse().map(Token::Int).ok()
            };
            out.push((
                token.ok_or_else(|| err(format!("bad number {digits:?}"), start))?,
                start,
            ));
        } else if c == b'\'' || c == b'"' {
            i += 1;
            let mut s = String::new();
            loop {
                let Some(ch) = text[i..].chars().next() else {
                    return Err(err("unterminated string".into(), start));
                };
                i += ch.len_utf8();
                match ch {
                    ch if ch as u32 == c as u32 => break,
                    '\\' => {
                        let Some(e) = text[i..].chars().next() else {
                            return Err(err("unterminated string".into(), start));
                        };
                        i += e.len_utf8();
                        s.push(match e {
                            'n' => '\n',
                            't' => '\t',
                            '0' => '\0',
                            e @ ('\\' | '\'' | '"') => e,
                            e => return Err(err(format!("escape \\{e} not supported"), i)),
                        });
                    }
                    ch => s.push(ch),
                }
            }
            out.push((Token::Str(s), start));
        } else if c == b'(' {
            i += 1;
            out.push((Token::Open, start));
        } else if c == b')' {
            i += 1;
            out.push((Token::Close, start));
        } else if c == b',' {
            i += 1;
            out.push((Token::Comma, start));
        } else if let Some(op) = OPERATORS.iter().find(|op| text[i..].starts_with(**op)) {
            i += op.len();
            out.push((Token::Op(op), start));
        } else if c == b'~' {
            i += 1;
            out.push((Token::Op("~"), start));
        } else {
            let ch = text[i..].chars().next().unwrap_or('?');
            return Err(err(format!("unexpected character {ch:?}"), start));
        }
    }
    out.push((Token::End, text.len()));
    Ok(out)
}

struct Parser {
    tokens: Vec<(Token, usize)>,
    pos: usize,
    depth: usize,
}

/// Binary operator levels below the unary ones, lowest first (comparisons are parsed
/// on their own: Python chains them).
const LEVELS: [&[(&str, BinaryOp)]; 6] = [
    &[("|", BinaryOp::Or)],
    &[("^", BinaryOp::Xor)],
    &[("&", BinaryOp::And)],
    &[("<<", BinaryOp::Shl), (">>", BinaryOp::Shr)],
    &[("+", BinaryOp::Add), ("-", BinaryOp::Sub)],
    &[
        ("*", BinaryOp::Mul),
        ("/", BinaryOp::Div),
        ("//", BinaryOp::FloorDiv),
        ("%", BinaryOp::Mod),
    ],
];

const COMPARISONS: [(&str, BinaryOp); 6] = [
    ("<", BinaryOp::Lt),
    ("<=", BinaryOp::Le),
    (">", BinaryOp::Gt),
    (">=", BinaryOp::Ge),
    ("==", BinaryOp::Eq),
    ("!=", BinaryOp::Ne),
];

impl Parser {
    fn peek(&self) -> &Token {
        &self.tokens[self.pos].0
    }

    fn error(&self, message: String) -> ParseError {
        ParseError {
            message,
            at: self.tokens[self.pos].1,
        }
    }

    fn next(&mut self) -> Token {
        let t = self.tokens[self.pos].0.clone();
        if t != Token::End {
            self.pos += 1;
        }
        t
    }

    /// The operator of `ops` the next token is, if any (consumed).
    fn eat_op(&mut self, ops: &[(&str, BinaryOp)]) -> Option<BinaryOp> {
        let Token::Op(t) = self.peek() else {
            return None;
        };
        let op = ops.iter().find(|(s, _)| s == t)?.1;
        self.pos += 1;
        Some(op)
    }

    fn enter(&mut self) -> Result<(), ParseError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(self.error(format!("nested deeper than {MAX_DEPTH}")));
        }
        Ok(())
    }

    fn comparison(&mut self) -> Result<Expression, ParseError> {
        self.enter()?;
        let left = self.level(0)?;
        let e = match self.eat_op(&COMPARISONS) {
            Some(op) => {
                let right = self.level(0)?;
                if matches!(self.peek(), Token::Op(t) if COMPARISONS.iter().any(|(s, _)| s == t)) {
                    return Err(self.error("chained comparisons are not supported".into()));
                }
                Expression::Binary(op, Box::new(left), Box::new(right))
            }
            None => left,
        };
        self.depth -= 1;
        Ok(e)
    }

    /// Left-associative binary levels `k..`.
    fn level(&mut self, k: usize) -> Result<Expression, ParseError> {
        if k == LEVELS.len() {
            return self.unary();
        }
        let mut e = self.level(k + 1)?;
        let mut depth = None;
        while let Some(op) = self.eat_op(LEVELS[k]) {
            let at = self.pos;
            let right = self.level(k + 1)?;
            let d = depth
                .unwrap_or_else(|| tree_depth(&e))
                .max(tree_depth(&right))
                + 1;
            if d > MAX_TREE_DEPTH {
                self.pos = at;
                return Err(self.error(format!(
                    "the expression's tree is deeper than {MAX_TREE_DEPTH} (a chain of too many operators)"
                )));
            }
            depth = Some(d);
            e = Expression::Binary(op, Box::new(e), Box::new(right));
        }
        Ok(e)
    }

    fn unary(&mut self) -> Result<Expression, ParseError> {
        let op = match self.peek() {
            Token::Op("-") => UnaryOp::Neg,
            Token::Op("+") => UnaryOp::Pos,
            Token::Op("~") => UnaryOp::Invert,
            _ => return self.power(),
        };
        self.pos += 1;
        self.enter()?;
        let operand = self.unary()?;
        self.depth -= 1;
        Ok(Expression::Unary(op, Box::new(operand)))
    }

    /// `primary ** unary` (right-associative, binding tighter than a unary minus on
    /// its left: `-2 ** 2` is `-(2 ** 2)`).
    fn power(&mut self) -> Result<Expression, ParseError> {
        let base = self.primary()?;
        if self.eat_op(&[("**", BinaryOp::Pow)]).is_some() {
            self.enter()?;
            let exponent = self.unary()?;
            self.depth -= 1;
            return Ok(Expression::Binary(
                BinaryOp::Pow,
                Box::new(base),
                Box::new(exponent),
            ));
        }
        Ok(base)
    }

    fn primary(&mut self) -> Result<Expression, ParseError> {
        let at = self.pos;
        match self.next() {
            Token::Int(v) => Ok(Expression::Int(v)),
            Token::Float(v) => Ok(Expression::Float(v)),
            Token::Str(s) => Ok(Expression::Str(s)),
            Token::Open => {
                let e = self.comparison()?;
                self.expect_close()?;
                Ok(e)
            }
            Token::Name(n) => match n.as_str() {
                "True" => Ok(Expression::Bool(true)),
                "False" => Ok(Expression::Bool(false)),
                "and" | "or" | "not" | "if" | "else" | "lambda" | "in" | "is" => {
                    self.pos = at;
                    Err(self.error(format!("the keyword {n:?} is not supported")))
                }
                _ if *self.peek() == Token::Open => {
                    self.pos += 1;
                    self.enter()?;
                    let mut args = Vec::new();
                    if *self.peek() != Token::Close {
                        loop {
                            args.push(self.comparison()?);
                            if *self.peek() != Token::Comma {
                                break;
                            }
                            self.pos += 1;
                        }
                    }
                    self.expect_close()?;
                    self.depth -= 1;
                    Ok(Expression::Call(n, args))
                }
                _ => Ok(Expression::Name(n)),
            },
            t => {
                self.pos = at;
                Err(self.error(format!("expected an operand, found {t:?}")))
            }
        }
    }

    fn expect_close(&mut self) -> Result<(), ParseError> {
        match self.next() {
            Token::Close => Ok(()),
            t => {
                self.pos -= usize::from(t != Token::End);
                Err(self.error(format!("expected ')', found {t:?}")))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use BinaryOp::*;

    fn name(n: &str) -> Box<Expression> {
        Box::new(Expression::Name(n.into()))
    }

    fn bin(op: BinaryOp, a: Box<Expression>, b: Box<Expression>) -> Box<Expression> {
        Box::new(Expression::Binary(op, a, b))
    }

    /// What python-blosc2 writes for `add_computed_column`, and Python's precedence.
    #[test]
    fn python_precedence() {
        assert_eq!(
            parse("(o0 * o1)").unwrap(),
            *bin(Mul, name("o0"), name("o1"))
        );
        assert_eq!(
            parse("(where(o0 > 2, o0 ** 2, sqrt(o0)))").unwrap(),
            Expression::Call(
                "where".into(),
                vec![
                    *bin(Gt, name("o0"), Box::new(Expression::Int(2))),
                    *bin(Pow, name("o0"), Box::new(Expression::Int(2))),
                    Expression::Call("sqrt".into(), vec![*name("o0")]),
                ]
            )
        );
        // a + b * c ** -d ** e
        assert_eq!(
            parse("a + b * c ** -d ** e").unwrap(),
            *bin(
                Add,
                name("a"),
                bin(
                    Mul,
                    name("b"),
                    bin(
                        Pow,
                        name("c"),
                        Box::new(Expression::Unary(
                            UnaryOp::Neg,
                            bin(Pow, name("d"), name("e"))
                        ))
                    )
                )
            )
        );
        // -2 ** 2 is -(2 ** 2); comparisons bind loosest, then | ^ & shifts.
        assert_eq!(
            parse("-2 ** 2").unwrap(),
            Expression::Unary(
                UnaryOp::Neg,
                bin(
                    Pow,
                    Box::new(Expression::Int(2)),
                    Box::new(Expression::Int(2))
                )
            )
        );
        assert_eq!(
            parse("a | b ^ c & d << e < f").unwrap(),
            *bin(
                Lt,
                bin(
                    Or,
                    name("a"),
                    bin(
                        Xor,
                        name("b"),
                        bin(And, name("c"), bin(Shl, name("d"), name("e")))
                    )
                ),
                name("f")
            )
        );
        assert_eq!(
            parse("a - b - c // d % e").unwrap(),
            *bin(
                Sub,
                bin(Sub, name("a"), name("b")),
                bin(Mod, bin(FloorDiv, name("c"), name("d")), name("e"))
            )
        );
        assert_eq!(
            parse("~(a >= 1.5e3) & (s == 'x\\'y')").unwrap(),
            *bin(
                And,
                Box::new(Expression::Unary(
                    UnaryOp::Invert,
                    bin(Ge, name("a"), Box::new(Expression::Float(1500.0)))
                )),
                bin(Eq, name("s"), Box::new(Expression::Str("x'y".into())))
            )
        );
        assert_eq!(parse("True").unwrap(), Expression::Bool(true));
        assert_eq!(
            parse(".5 + 1_000").unwrap(),
            *bin(
                Add,
                Box::new(Expression::Float(0.5)),
                Box::new(Expression::Int(1000))
            )
        );
    }

    #[test]
    fn bad_syntax_is_an_error_with_its_place() {
        for (text, at) in [
            ("a +", 3),
            ("(a", 2),
            ("a b", 2),
            ("a < b < c", 6),
            ("a and b", 2),
            ("f(a,", 4),
            ("'abc", 0),
            ("a $ b", 2),
            ("1x", 0),
            ("", 0),
            ("a)", 1),
            ("99999999999999999999", 0),
        ] {
            let e = parse(text).unwrap_err();
            assert_eq!(e.at, at, "{text:?}: {e}");
        }
        let deep = format!("{}a{}", "(".repeat(500), ")".repeat(500));
        assert!(parse(&deep).unwrap_err().message.contains("nested deeper"));
        let deep = format!("{}a", "-".repeat(500));
        assert!(parse(&deep).unwrap_err().message.contains("nested deeper"));
        let deep = format!("{}a", "a ** ".repeat(500));
        assert!(parse(&deep).unwrap_err().message.contains("nested deeper"));
        // Chains nest without parentheses: 255 operators are a tree of depth 256, one
        // more is refused; a hostile chain of 200 000 is refused without walking (or
        // dropping) a tree that deep.
        let chain = |ops: usize, op: &str| format!("o0{}", format!(" {op} o0").repeat(ops));
        assert_eq!(tree_depth(&parse(&chain(255, "+")).unwrap()), 256);
        for op in ["+", "*", "&", "<<"] {
            let e = parse(&chain(256, op)).unwrap_err();
            assert!(e.message.contains("deeper than 256"), "{op}: {e}");
            let e = parse(&chain(200_000, op)).unwrap_err();
            assert!(e.message.contains("deeper than 256"), "{op}: {e}");
        }
        let nested = format!("f({})", chain(255, "-"));
        assert_eq!(tree_depth(&parse(&nested).unwrap()), 257);
        assert!(parse(&format!("({}) + o1", chain(255, "-"))).is_err());
    }

    /// Random strings over the expression alphabet (and some that is not): an `Ok` or an
    /// `Err`, never a panic.
    #[test]
    fn any_text_parses_or_is_refused() {
        let pieces = [
            "o0", "1", "2.5e3", "'é'", "\"x\"", "(", ")", ",", "+", "-", "**", "*", "/", "//", "%",
            "<", "<=", "==", "~", "&", "|", "^", "<<", "where", "sqrt", "True", " ", "é", "日",
            "'", "\\", ".", "e", "_", "0x", "1e", "$",
        ];
        let mut seed = 7u64;
        for _ in 0..20_000 {
            let mut text = String::new();
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            for k in 0..(seed % 12) {
                text.push_str(pieces[((seed >> (k * 5)) % pieces.len() as u64) as usize]);
            }
            let _ = parse(&text);
        }
    }
}
