package bench

import (
	"errors"
	"testing"

	"github.com/pvperf/pvperf/bench/oob"
)

func TestParseCPUMessage(t *testing.T) {
	got, err := parseCPUMessage([]byte(`{"cpu":[{"msg_size_bytes":2,"cpu_s":0.5,"wall_s":1,"messages":1000}]}`))
	if err != nil || len(got) != 1 || got[0].Size != 2 || got[0].CPUSeconds != 0.5 || got[0].Messages != 1000 {
		t.Fatalf("%+v %v", got, err)
	}
	for _, in := range []string{``, `{`, `{"cpu":[{"cpu_s":-1}]}`, `{"cpu":[{"wall_s":-0.5}]}`, `{"cpu":"x"}`, `{"cpu":[{"messages":-1}]}`} {
		if _, err := parseCPUMessage([]byte(in)); !errors.Is(err, oob.ErrMalformed) {
			t.Errorf("%q: %v", in, err)
		}
	}
}

func FuzzParseCPUMessage(f *testing.F) {
	f.Add([]byte(`{"cpu":[{"msg_size_bytes":2,"cpu_s":0.5,"wall_s":1,"messages":1000}]}`))
	f.Add([]byte(`{"cpu":[]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		spans, err := parseCPUMessage(b)
		if err != nil {
			return
		}
		for _, s := range spans {
			if !(s.CPUSeconds >= 0 && s.WallSeconds >= 0) {
				t.Fatalf("accepted %+v", s)
			}
		}
	})
}
