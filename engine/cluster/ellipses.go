// Package cluster turns endpoint arguments and topology files into the
// drives of a deployment and agrees on their format.
package cluster

import (
	"fmt"
	"regexp"
	"strconv"
)

// ellipsis matches one {a...b} range. Bounds are decimal; a zero-padded
// lower bound ({01...16}) pads every value to its width.
var ellipsis = regexp.MustCompile(`\{([0-9]+)\.\.\.([0-9]+)\}`)

// maxExpansion bounds what one argument may expand to.
const maxExpansion = 1 << 16

// ExpandEllipses expands every {a...b} range in arg, leftmost range varying
// slowest: "h{1...2}/d{1...2}" gives h1/d1 h1/d2 h2/d1 h2/d2. An argument
// without ranges expands to itself.
func ExpandEllipses(arg string) ([]string, error) {
	loc := ellipsis.FindStringSubmatchIndex(arg)
	if loc == nil {
		return []string{arg}, nil
	}
	loStr, hiStr := arg[loc[2]:loc[3]], arg[loc[4]:loc[5]]
	lo, err1 := strconv.Atoi(loStr)
	hi, err2 := strconv.Atoi(hiStr)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("endpoint %q: range {%s...%s} is not numeric", arg, loStr, hiStr)
	}
	if lo > hi {
		return nil, fmt.Errorf("endpoint %q: range {%s...%s} runs backwards", arg, loStr, hiStr)
	}
	width := 0
	if len(loStr) > 1 && loStr[0] == '0' {
		width = len(loStr)
	}
	rest, err := ExpandEllipses(arg[loc[1]:])
	if err != nil {
		return nil, err
	}
	// hi-lo first: their product could overflow (a fuzz-found panic).
	if hi-lo >= maxExpansion || (hi-lo+1)*len(rest) > maxExpansion {
		return nil, fmt.Errorf("endpoint %q expands to more than %d endpoints", arg, maxExpansion)
	}
	out := make([]string, 0, (hi-lo+1)*len(rest))
	for v := lo; v <= hi; v++ {
		for _, r := range rest {
			out = append(out, fmt.Sprintf("%s%0*d%s", arg[:loc[0]], width, v, r))
		}
	}
	return out, nil
}

// ExpandAll expands every argument in order.
func ExpandAll(args []string) ([]string, error) {
	var out []string
	for _, a := range args {
		e, err := ExpandEllipses(a)
		if err != nil {
			return nil, err
		}
		out = append(out, e...)
	}
	return out, nil
}
