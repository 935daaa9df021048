package render

import (
	"context"
	"fmt"
	"strings"
	"text/template"

	"github.com/Masterminds/sprig/v3"
)

// boundedFuncs replaces the template functions through which a chart can
// ask for unbounded memory or time (a list of a billion numbers, a string
// doubled in a loop, a gigabyte of random letters) with ones that give the
// same results within the render's limits, and fail past them. They also
// check the render's context, so a cancelled render stops at the next
// call of any of them (printf and include-heavy charts call them often).
// With a generator, the functions that draw randomness or read the clock
// draw from it instead (see Generate).
func boundedFuncs(ctx context.Context, lim Limits, gen *generator) template.FuncMap {
	maxBytes := int(min(lim.OutputBytes, 1<<31-1))
	maxItems := lim.Objects * 100 // a range this long renders more than any chart
	sp := sprig.TxtFuncMap()
	check := func(name string, n int, max int) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if n > max {
			unit := "bytes"
			if max == maxItems {
				unit = "items"
			}
			return fmt.Errorf("%s: %d %s, more than a render may produce (%d; raise it with %s)", name, n, unit, max, FlagOutputBytes)
		}
		return nil
	}
	str := func(name string, f func(...any) string) func(...any) (string, error) {
		return func(args ...any) (string, error) {
			s := f(args...)
			return s, check(name, len(s), maxBytes)
		}
	}
	funcs := template.FuncMap{
		"print":   str("print", fmt.Sprint),
		"println": str("println", fmt.Sprintln),
		"printf": func(format string, args ...any) (string, error) {
			s := fmt.Sprintf(format, args...)
			return s, check("printf", len(s), maxBytes)
		},
		"cat": str("cat", sp["cat"].(func(...any) string)),
		"repeat": func(count int, s string) (string, error) {
			if err := check("repeat", count*len(s), maxBytes); err != nil {
				return "", err
			}
			return strings.Repeat(s, count), nil
		},
		"join": func(sep string, v any) (string, error) {
			s := sp["join"].(func(string, any) string)(sep, v)
			return s, check("join", len(s), maxBytes)
		},
		"indent": func(spaces int, v string) (string, error) {
			if err := check("indent", spaces*(strings.Count(v, "\n")+1)+len(v), maxBytes); err != nil {
				return "", err
			}
			return sp["indent"].(func(int, string) string)(spaces, v), nil
		},
		"nindent": func(spaces int, v string) (string, error) {
			if err := check("nindent", spaces*(strings.Count(v, "\n")+1)+len(v), maxBytes); err != nil {
				return "", err
			}
			return sp["nindent"].(func(int, string) string)(spaces, v), nil
		},
		"until": func(count int) ([]int, error) {
			if err := check("until", count, maxItems); err != nil {
				return nil, err
			}
			return sp["until"].(func(int) []int)(count), nil
		},
		"untilStep": func(start, stop, step int) ([]int, error) {
			n := 0
			if step != 0 {
				n = (stop - start) / step
			}
			if err := check("untilStep", n, maxItems); err != nil {
				return nil, err
			}
			return sp["untilStep"].(func(int, int, int) []int)(start, stop, step), nil
		},
		"seq": func(params ...int) (string, error) {
			n := 0
			switch len(params) {
			case 1:
				n = params[0]
			case 2:
				n = params[1] - params[0]
			case 3:
				if params[1] != 0 {
					n = (params[2] - params[0]) / params[1]
				}
			}
			if n < 0 {
				n = -n
			}
			if err := check("seq", n, maxItems); err != nil {
				return "", err
			}
			return sp["seq"].(func(...int) string)(params...), nil
		},
		"randAlphaNum": boundedRand(check, "randAlphaNum", sp["randAlphaNum"], maxBytes),
		"randAlpha":    boundedRand(check, "randAlpha", sp["randAlpha"], maxBytes),
		"randNumeric":  boundedRand(check, "randNumeric", sp["randNumeric"], maxBytes),
		"randAscii":    boundedRand(check, "randAscii", sp["randAscii"], maxBytes),
	}
	if gen != nil {
		for name, f := range gen.funcs(check, maxBytes) {
			funcs[name] = f
		}
	}
	return funcs
}

// boundedRand bounds one of sprig's rand* functions, which make a string
// of the length asked.
func boundedRand(check func(string, int, int) error, name string, f any, max int) func(int) (string, error) {
	fn := f.(func(int) string)
	return func(n int) (string, error) {
		if err := check(name, n, max); err != nil {
			return "", err
		}
		return fn(n), nil
	}
}
