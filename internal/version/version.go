package version

// Version is pvperf's version. Release builds set it with
//
//	go build -ldflags "-X github.com/pvperf/pvperf/internal/version.Version=1.2.3"
var Version = "devel"
