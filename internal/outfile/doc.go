// Package outfile writes the files pvperf's commands are asked for
// (perftest's --out_json_file, the JSON and CSV of cluster, cm_setup and
// compare, the HTML of report): it checks, before a run, that each can be
// written, and writes each so that a failed write leaves no truncated file.
//
// It owns nothing between calls and is safe for concurrent use on
// different names.
package outfile
