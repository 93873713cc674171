# From go test's output after a timeout, each goroutine that is in this
# module's code: its header line ("goroutine N [state, minutes]:") and its
# frames in the module with their file:line. .ci/run prints it when go test
# fails, so a hang's culprit is in the tail CI shows and not buried in a
# dump of thousands of library goroutines.
/^goroutine [0-9]+ \[/ { hdr = $0; shown = 0; next }
/^github\.com\/edge-gateway\/edge\// {
	if (hdr == "") next
	if (!shown) { print hdr; shown = 1 }
	fn = $0
	if ((getline loc) > 0) { split(loc, f, " "); print "  " fn " " f[1] }
}
