//! Computed-column expressions python-blosc2 4.14.1 evaluates with NumPy rather than
//! numexpr: those calling `clip`, `reciprocal` or `logaddexp`, which numexpr lacks, so
//! python-blosc2 runs the whole expression in Python over NumPy arrays.
//!
//! Every operation then runs in NumPy's type for it (NEP 50), not in numexpr's kinds:
//! `s * 100` over `int8` wraps at 8 bits, `uint64` is `uint64`, a Python number takes
//! the array's type, `h * 2.5` over `float32` is a float32 product. Inside `clip` etc.
//! the value is NumPy's (`clip(s, -5.5, 5)` over `int8` is float64 there); the caller
//! casts the whole expression to the dtype python-blosc2 reports.
//!
//! Translated: columns, numbers, booleans; `+ - * /`; `//` and `%` of integers; `**` of
//! integers by a non-negative integer and of floats by 2; comparisons; `& | ^ ~ << >>`;
//! unary `-`; `clip`, `reciprocal`, `logaddexp`. Anything else (other functions, text,
//! `where`, which python-blosc2 cannot run this way) leaves the column out with the
//! reason.

use super::numexpr_functions::ieee_comparison;
use super::numpy_functions::{NumpyFunction, first_numpy_call, int_bound};
use super::numpy_types::{Np, float_of, promote};
use super::wrapping_cast::wrapping_cast;
use crate::array::expression::{BinaryOp, Expression, UnaryOp};
use arrow::datatypes::DataType;
use datafusion::common::{Column, DFSchema, ScalarValue};
use datafusion::logical_expr::{Cast, Expr, Operator, binary_expr, lit};

/// A translated subexpression: its value and NumPy type; `constant` when it is made of
/// Python numbers only (NumPy's `clip` loop for constant bounds keeps `x` on ties).
struct Typed {
    e: Expr,
    t: Np,
    constant: bool,
}

/// Where the translation looks names up.
struct Scope<'a> {
    column: &'a dyn Fn(&str) -> String,
    schema: &'a DFSchema,
    /// The NumPy-evaluated function that put the expression in this mode (for reasons).
    because: &'a str,
}

/// `tree` (which calls a NumPy-evaluated function) as a DataFusion expression computing
/// NumPy's values, in NumPy's type of the expression; `column` maps an operand name to
/// its stored column in `schema`.
pub fn translate(
    tree: &Expression,
    column: &dyn Fn(&str) -> String,
    schema: &DFSchema,
) -> Result<Expr, String> {
    let because = first_numpy_call(tree).unwrap_or("clip");
    let scope = Scope {
        column,
        schema,
        because,
    };
    Ok(scope.go(tree)?.e)
}

/// The concrete type of a NumPy type: a Python `int` computes as int64, a `float` as
/// float64.
fn concrete(t: &Np) -> DataType {
    match t {
        Np::Strong(t) => t.clone(),
        Np::WeakInt => DataType::Int64,
        Np::WeakFloat => DataType::Float64,
    }
}

/// `x`'s value as type `t`. A Python integer that does not fit an integer `t` is refused,
/// as NumPy 2 refuses it (`OverflowError`).
fn to(x: &Typed, t: &DataType) -> Result<Expr, String> {
    if concrete(&x.t) == *t {
        return Ok(x.e.clone());
    }
    if let Expr::Literal(v, _) = &x.e {
        return v
            .cast_to(t)
            .map(lit)
            .map_err(|_| format!("the number {v} does not fit {t}"));
    }
    Ok(Expr::Cast(Cast::new(Box::new(x.e.clone()), t.clone())))
}

fn is_int(t: &DataType) -> bool {
    t.is_integer()
}

fn is_float(t: &DataType) -> bool {
    matches!(t, DataType::Float32 | DataType::Float64)
}

impl Scope<'_> {
    fn unsupported(&self, what: &str) -> String {
        format!(
            "{what} in an expression python-blosc2 evaluates with NumPy (because of {}()) \
             is not supported",
            self.because
        )
    }

    fn go(&self, e: &Expression) -> Result<Typed, String> {
        Ok(match e {
            Expression::Name(n) => {
                let c = (self.column)(n);
                let Ok(f) = self.schema.field_with_unqualified_name(&c) else {
                    return Err(format!("no stored column {c:?}"));
                };
                Typed {
                    e: Expr::Column(Column::new_unqualified(c)),
                    t: Np::Strong(f.data_type().clone()),
                    constant: false,
                }
            }
            Expression::Int(v) => Typed {
                e: lit(*v),
                t: Np::WeakInt,
                constant: true,
            },
            Expression::Float(v) => Typed {
                e: lit(*v),
                t: Np::WeakFloat,
                constant: true,
            },
            Expression::Bool(v) => Typed {
                e: lit(*v),
                t: Np::Strong(DataType::Boolean),
                constant: true,
            },
            Expression::Str(_) => return Err(self.unsupported("text")),
            Expression::Unary(op, x) => self.unary(*op, self.go(x)?)?,
            Expression::Binary(op, a, b) => self.binary(*op, self.go(a)?, self.go(b)?, b)?,
            Expression::Call(name, args) => {
                let args = args
                    .iter()
                    .map(|a| self.go(a))
                    .collect::<Result<Vec<_>, _>>()?;
                self.call(name, args)?
            }
        })
    }

    fn unary(&self, op: UnaryOp, x: Typed) -> Result<Typed, String> {
        let t = concrete(&x.t);
        let e = match op {
            UnaryOp::Pos => return Ok(x),
            UnaryOp::Neg if t == DataType::Boolean => return Err(self.unsupported("- of a bool")),
            // Unsigned integers wrap around (`-u` of a uint8 3 is 253).
            UnaryOp::Neg if t.is_unsigned_integer() => wrapping_cast(
                Expr::Negative(Box::new(wrapping_cast(x.e, DataType::Int64))),
                t,
            ),
            // A negated Python number stays a number (`clip(s, -1000, 5)` bounds nothing).
            UnaryOp::Neg => match &x.e {
                Expr::Literal(ScalarValue::Int64(Some(v)), _) => match v.checked_neg() {
                    Some(v) => lit(v),
                    None => return Err(format!("-({v}) overflows")),
                },
                Expr::Literal(ScalarValue::Float64(Some(v)), _) => lit(-v),
                _ if is_int(&t) || is_float(&t) => Expr::Negative(Box::new(x.e)),
                _ => return Err(self.unsupported(&format!("- of {t}"))),
            },
            UnaryOp::Invert if t == DataType::Boolean => Expr::Not(Box::new(x.e)),
            UnaryOp::Invert if is_int(&t) => {
                binary_expr(x.e, Operator::BitwiseXor, lit(all_ones(&t)?))
            }
            _ => return Err(self.unsupported(&format!("{op:?} of {t}"))),
        };
        Ok(Typed { e, ..x })
    }

    fn binary(
        &self,
        op: BinaryOp,
        a: Typed,
        b: Typed,
        b_tree: &Expression,
    ) -> Result<Typed, String> {
        use BinaryOp as B;
        let Some(p) = promote(a.t.clone(), b.t.clone()) else {
            return Err(self.unsupported(&format!("{op:?} of {:?} and {:?}", a.t, b.t)));
        };
        let pt = concrete(&p);
        let constant = a.constant && b.constant;
        let both = |t: &DataType, o: Operator| -> Result<Expr, String> {
            Ok(binary_expr(to(&a, t)?, o, to(&b, t)?))
        };
        let typed = |e: Expr, t: Np| Typed { e, t, constant };
        let bool_t = Np::Strong(DataType::Boolean);
        Ok(match op {
            B::Add if pt == DataType::Boolean => typed(both(&pt, Operator::Or)?, p),
            B::Mul if pt == DataType::Boolean => typed(both(&pt, Operator::And)?, p),
            B::Add | B::Sub | B::Mul if is_int(&pt) || is_float(&pt) => {
                let o = match op {
                    B::Add => Operator::Plus,
                    B::Sub => Operator::Minus,
                    _ => Operator::Multiply,
                };
                typed(both(&pt, o)?, p)
            }
            B::Div if is_int(&pt) || is_float(&pt) || pt == DataType::Boolean => {
                // True division: integers and booleans as float64.
                let r = if is_float(&pt) { pt } else { DataType::Float64 };
                let t = match p {
                    Np::Strong(_) => Np::Strong(r.clone()),
                    _ => Np::WeakFloat,
                };
                typed(both(&r, Operator::Divide)?, t)
            }
            B::FloorDiv | B::Mod if is_int(&pt) => {
                let e = super::computed::binary(op, to(&a, &pt)?, to(&b, &pt)?, self.schema)?;
                typed(e, p)
            }
            B::Lt | B::Le | B::Gt | B::Ge | B::Eq | B::Ne => {
                let e = match is_float(&pt) {
                    true => ieee_comparison(op, to(&a, &pt)?, to(&b, &pt)?).expect("a comparison"),
                    false => both(&pt, comparison(op).expect("a comparison"))?,
                };
                typed(e, bool_t)
            }
            B::And | B::Or | B::Xor if pt == DataType::Boolean => {
                let o = match op {
                    B::And => Operator::And,
                    B::Or => Operator::Or,
                    _ => Operator::NotEq,
                };
                typed(both(&pt, o)?, p)
            }
            B::And | B::Or | B::Xor | B::Shl | B::Shr if is_int(&pt) => {
                let o = match op {
                    B::And => Operator::BitwiseAnd,
                    B::Or => Operator::BitwiseOr,
                    B::Xor => Operator::BitwiseXor,
                    B::Shl => Operator::BitwiseShiftLeft,
                    _ => Operator::BitwiseShiftRight,
                };
                typed(both(&pt, o)?, p)
            }
            B::Pow => self.power(a, b_tree, p, constant)?,
            _ => return Err(self.unsupported(&format!("{op:?} of {pt}"))),
        })
    }

    /// `a ** k`: integers by a non-negative integer literal (products, wrapping as
    /// NumPy's integer power does); floats by 2 (NumPy squares).
    fn power(&self, a: Typed, k: &Expression, p: Np, constant: bool) -> Result<Typed, String> {
        let pt = concrete(&p);
        let k = match k {
            Expression::Int(k) if *k >= 0 && *k <= 64 => *k as u32,
            _ => return Err(self.unsupported("** other than by an integer literal")),
        };
        if !(is_int(&pt) || (is_float(&pt) && k == 2)) {
            return Err(self.unsupported(&format!("** {k} of {pt}")));
        }
        let x = to(&a, &pt)?;
        let e = match k {
            0 => lit(ScalarValue::Int64(Some(1))
                .cast_to(&pt)
                .map_err(|e| e.to_string())?),
            _ => (1..k).fold(x.clone(), |e, _| {
                binary_expr(e, Operator::Multiply, x.clone())
            }),
        };
        Ok(Typed { e, t: p, constant })
    }

    fn call(&self, name: &str, mut args: Vec<Typed>) -> Result<Typed, String> {
        let arity = |n: usize| match args.len() == n {
            true => Ok(()),
            false => Err(format!("{name}() takes {n} arguments, not {}", args.len())),
        };
        match name {
            "reciprocal" => {
                arity(1)?;
                let one = Typed {
                    e: lit(1.0),
                    t: Np::WeakFloat,
                    constant: true,
                };
                let x = args.pop().expect("one");
                self.binary(BinaryOp::Div, one, x, &Expression::Float(1.0))
            }
            "logaddexp" => {
                arity(2)?;
                let (b, a) = (args.pop().expect("two"), args.pop().expect("two"));
                let p = promote(a.t.clone(), b.t.clone()).and_then(float_of);
                let t = p.as_ref().map(concrete).filter(is_float);
                let (Some(p), Some(t)) = (p, t) else {
                    return Err(self.unsupported("logaddexp() of these types"));
                };
                let constant = a.constant && b.constant;
                let e = NumpyFunction::Logaddexp.call(vec![to(&a, &t)?, to(&b, &t)?]);
                Ok(Typed { e, t: p, constant })
            }
            "clip" => {
                arity(3)?;
                let (hi, lo, x) = (
                    args.pop().expect("3"),
                    args.pop().expect("3"),
                    args.pop().expect("3"),
                );
                let p = promote(x.t.clone(), lo.t.clone()).and_then(|p| promote(p, hi.t.clone()));
                let Some(p) = p else {
                    return Err(self.unsupported("clip() of these types"));
                };
                let t = concrete(&p);
                if !(is_int(&t) || is_float(&t)) {
                    return Err(self.unsupported(&format!("clip() of {t}")));
                }
                // NumPy clips a Python integer bound beyond an integer type to it.
                let bound = |b: &Typed, upper: bool| match (&b.e, b.t == Np::WeakInt && is_int(&t))
                {
                    (Expr::Literal(ScalarValue::Int64(Some(v)), _), true) => {
                        int_bound(*v, &t, upper)
                    }
                    _ => to(b, &t),
                };
                let f = match lo.constant && hi.constant {
                    true => NumpyFunction::ClipByConstants,
                    false => NumpyFunction::Clip,
                };
                let e = f.call(vec![to(&x, &t)?, bound(&lo, false)?, bound(&hi, true)?]);
                let constant = x.constant && lo.constant && hi.constant;
                Ok(Typed { e, t: p, constant })
            }
            _ => Err(self.unsupported(&format!("{name}()"))),
        }
    }
}

/// The integer of type `t` with every bit set.
fn all_ones(t: &DataType) -> Result<ScalarValue, String> {
    let ones = match t {
        DataType::UInt8 => ScalarValue::UInt8(Some(u8::MAX)),
        DataType::UInt16 => ScalarValue::UInt16(Some(u16::MAX)),
        DataType::UInt32 => ScalarValue::UInt32(Some(u32::MAX)),
        DataType::UInt64 => ScalarValue::UInt64(Some(u64::MAX)),
        t => ScalarValue::Int64(Some(-1))
            .cast_to(t)
            .map_err(|e| e.to_string())?,
    };
    Ok(ones)
}

fn comparison(op: BinaryOp) -> Option<Operator> {
    use BinaryOp as B;
    Some(match op {
        B::Lt => Operator::Lt,
        B::Le => Operator::LtEq,
        B::Gt => Operator::Gt,
        B::Ge => Operator::GtEq,
        B::Eq => Operator::Eq,
        B::Ne => Operator::NotEq,
        _ => return None,
    })
}
