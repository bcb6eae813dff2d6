// Command urlparse reads hex-encoded patterns, one a line, and prints for each whether Go's
// url.Parse takes "https://" and the pattern, as the kubelet's ParseSchemelessURL does with a
// credential provider's matchImages entry: "ok", or "err" and Go's error.
package main

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
)

func main() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<20)
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	for in.Scan() {
		p, err := hex.DecodeString(in.Text())
		if err != nil {
			fmt.Fprintln(os.Stderr, "not hex:", err)
			os.Exit(2)
		}
		if _, err := url.Parse("https://" + string(p)); err != nil {
			fmt.Fprintf(out, "err %q\n", err.Error())
		} else {
			fmt.Fprintln(out, "ok")
		}
	}
	if err := in.Err(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
}
