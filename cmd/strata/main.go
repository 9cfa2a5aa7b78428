// Command strata is the Strata storage engine: `strata server` runs the
// erasure-coded S3 server, `strata gateway` the S3-to-POSIX gateway.
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/strata-storage/strata/engine/buildinfo"
)

const usage = `usage: strata <command> [flags]

commands:
  version   print the build version
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "version", "--version", "-version":
		fmt.Fprintf(stdout, "strata %s\n", buildinfo.String())
		return 0
	case "server", "gateway":
		fmt.Fprintf(stderr, "strata %s: not implemented in this build yet\n", args[0])
		return 1
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "strata: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
}
