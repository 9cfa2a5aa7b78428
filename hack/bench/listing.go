package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"
)

// cmdListing runs `bench listing`: one large set of small objects written
// to each target (strata server and MinIO by default), then ListObjectsV2
// over it, measured with the suite's machinery (runTarget): every object of
// the set 1000 a page, the set's directories (prefix and delimiter "/"),
// and the objects of one directory (prefix and delimiter).
func cmdListing(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench listing", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c := SuiteConfig{Name: "listing"}
	f := registerSuiteFlags(fs, &c, time.Hour, "strata,minio")
	var (
		objects = fs.Int("objects", 100000, "objects in the listed set")
		dirs    = fs.Int("dirs", 100, "directories (key prefixes) the set spreads over")
		size    = fs.String("size", "4KiB", "object size")
		listers = fs.Int("listers", 1, "clients listing at once (the set is written by -concurrency clients)")
	)
	for name, value := range map[string]string{"duration": "10s", "warmup": "2s"} {
		if err := fs.Set(name, value); err != nil {
			return err
		}
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	n, err := parseSize(*size)
	if err != nil {
		return err
	}
	if *objects < 1 || *dirs < 1 || *listers < 1 {
		return fmt.Errorf("listing: -objects, -dirs and -listers must be positive")
	}
	c.Profile = fmt.Sprintf("%d objects in %d directories, %d listers", *objects, *dirs, *listers)
	extra := strings.Fields(*f.strataArgs)
	kinds := []serverKind{
		strataServerKind(*f.strataBin, extra),
		minioKind(filepath.Join(*f.peersDir, "minio")),
		versitygwKind(filepath.Join(*f.peersDir, "versitygw"), *f.keepAlive),
	}
	return runSuite(ctx, c, f, kinds, listingSteps(*objects, *dirs, *listers, n), "bench listing "+strings.Join(args, " "), stdout, stderr)
}

// listingSteps lists one set three ways; the set is written before the
// first of them.
func listingSteps(objects, dirs, listers int, size int64) []Step {
	base := Step{Op: OpList, Size: size, Objects: objects, Dirs: dirs, Concurrency: listers,
		Dataset: fmt.Sprintf("list-%d-in-%d", objects, dirs)}
	var out []Step
	for _, shape := range []ListShape{ListAll, ListTop, ListDir} {
		s := base
		s.List = shape
		out = append(out, s)
	}
	return out
}
