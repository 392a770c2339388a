// Command report turns the JSON files that pvperf's tests write with
// --out_json into an HTML report with charts, CSV, or the Go benchmark
// format that benchstat reads:
//
//	report --html both.html roce-v1.json roce-v2.json
//	report --csv all.csv *.json
//	report --benchfmt new.txt run.json && benchstat old.txt new.txt
//
// Without an output option it prints a summary table. "-" writes to the
// standard output. Each output holds every input file, in the order given;
// the HTML charts overlay them. Files of one setup that hold different
// message sizes (a sweep run one size at a time) are joined into one run
// unless --no-merge is given.
package main
