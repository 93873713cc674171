package botscore

import "testing"

func TestJA4Fits(t *testing.T) {
	const (
		chrome  = "t13d1516h2_8daaf6152771_e5627efa2ab1" // FoxIO vectors; Chromium 156 gave t13d1517h2_8daaf6152771_…
		chrome2 = "t13i1517h2_8daaf6152771_61307d0e143d" // another c part: never judged
		firefox = "t13d1715h2_5b57614c22b0_3d5424432f57"
		goTLS   = "t13d1312h2_f57a46bbacb6_ab7e3b40a677"
		curl    = "t13d3112h1_e8f1e7e78f70_b26ce05bbdd6"
		python  = "t13i181000_85036bcba153_d41ae481755e"
		safari  = "t13d2014h2_a09f3c656075_14788d8d241b" // not in the table: fits Safari
	)
	tests := []struct {
		b    Browser
		fp   string
		want bool
	}{
		{BrowserChrome, chrome, true},
		{BrowserChrome, chrome2, true},
		{BrowserChrome, firefox, false},
		{BrowserChrome, goTLS, false},
		{BrowserChrome, curl, false},
		{BrowserChrome, python, false},
		{BrowserChrome, "t12d1516h2_8daaf6152771_e5627efa2ab1", false}, // Chrome's ciphers below TLS 1.3
		{BrowserChrome, safari, false},
		{BrowserFirefox, firefox, true},
		{BrowserFirefox, chrome, false},
		{BrowserFirefox, goTLS, false},
		{BrowserSafari, safari, true},
		{BrowserSafari, chrome, true}, // no Safari profile: only libraries are judged
		{BrowserSafari, goTLS, false},
		{BrowserSafari, curl, false},
		{BrowserOther, goTLS, true}, // IE, Presto: not judged
		{BrowserChrome, "", true},
		{BrowserChrome, "invalid", true},
		{BrowserChrome, "q13d0312h3_55b375c5d22e_1ab22e6cba8f", true}, // QUIC: not judged
	}
	for _, tt := range tests {
		if got := JA4Fits(tt.b, []byte(tt.fp)); got != tt.want {
			t.Errorf("JA4Fits(%d, %q) = %v, want %v", tt.b, tt.fp, got, tt.want)
		}
	}
}

func TestScoreJA4Mismatch(t *testing.T) {
	q := RequestSignals{UA: UABrowser, Browser: BrowserChrome, HasAccept: true, HasAcceptLanguage: true, HasAcceptEncoding: true, JA4Mismatch: true}
	r := Score(&NetSignals{}, &q)
	if !r.Reasons.Has(JA4Mismatch) || r.Score != 54 {
		t.Errorf("got score %d, reasons %s; want 54, ja4_mismatch", r.Score, r.Reasons.AppendNames(nil))
	}
	q.UA = UAAutomation // a tool that says so is judged by its User-Agent alone
	if r := Score(&NetSignals{}, &q); r.Reasons.Has(JA4Mismatch) {
		t.Errorf("ja4_mismatch on a non-browser User-Agent: %s", r.Reasons.AppendNames(nil))
	}
}
