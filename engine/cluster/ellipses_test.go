package cluster

import (
	"fmt"
	"strings"
	"testing"
)

func TestExpandEllipses(t *testing.T) {
	cases := []struct {
		arg  string
		want string
		err  string
	}{
		{arg: "/data/d1", want: "[/data/d1]"},
		{arg: "/data/d{1...4}", want: "[/data/d1 /data/d2 /data/d3 /data/d4]"},
		{arg: "/mnt/nvme{08...11}", want: "[/mnt/nvme08 /mnt/nvme09 /mnt/nvme10 /mnt/nvme11]"},
		{arg: "http://h{1...2}:9000/d{1...2}", want: "[http://h1:9000/d1 http://h1:9000/d2 http://h2:9000/d1 http://h2:9000/d2]"},
		{arg: "https://t-pool-a-{0...1}.t-hl.ns.svc.cluster.local:9000/data{0...1}",
			want: "[https://t-pool-a-0.t-hl.ns.svc.cluster.local:9000/data0 https://t-pool-a-0.t-hl.ns.svc.cluster.local:9000/data1 https://t-pool-a-1.t-hl.ns.svc.cluster.local:9000/data0 https://t-pool-a-1.t-hl.ns.svc.cluster.local:9000/data1]"},
		{arg: "/d{3...3}", want: "[/d3]"},
		{arg: "/d{4...1}", err: "runs backwards"},
		{arg: "/d{1...99999}{1...99999}", err: "expands to more than"},
		{arg: "/d{a...b}", want: "[/d{a...b}]"}, // not a range: taken literally
	}
	for _, c := range cases {
		got, err := ExpandEllipses(c.arg)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("ExpandEllipses(%q) error = %v, want %q", c.arg, err, c.err)
			}
			continue
		}
		if err != nil || fmt.Sprint(got) != c.want {
			t.Errorf("ExpandEllipses(%q) = %v, %v; want %s", c.arg, got, err, c.want)
		}
	}
}
