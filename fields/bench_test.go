package fields

import (
	"encoding/json"
	"strings"
	"testing"
)

// otpSendBody is a realistic 1 KiB OTP request: client metadata, a
// captcha token, and the phone number in national format near the end.
var otpSendBody = []byte(`{
  "channel": "sms",
  "locale": "en-US",
  "client": {
    "app": "web",
    "version": "4.18.2",
    "platform": "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36",
    "screen": {"width": 1512, "height": 982, "dpr": 2},
    "timezone": "America/New_York",
    "features": ["webauthn", "passkeys", "sms-autofill"]
  },
  "captcha": {
    "provider": "turnstile",
    "token": "0.kM3qv9Xo2nB7yT4wR1sZ8cL6fH5dJ0gP3aE9uQ2iV7mN4bC1xK8oW5rS6tY0zU3lD9hF2jG7eA4pI1qO8nM5vB2cX6kZ9wT3yR0sL7dH4fJ1gP8aE5uQ2iV9mN6bC3xK0oW7rS4tY1zU8lD5hF2jG9eA6pI3qO0nM7vB4cX1kZ8wT5yR2sL9dH6fJ3gP0aE7uQ4iV1mN8bC5xK2oW9rS6tY3zU0lD7hF4jG1eA8pI5qO2nM9vB6cX3kZ0wT7yR4sL1dH8fJ5gP2aE9uQ6iV3mN0bC7xK4oW1rS8tY5zU2lD9hF6jG3eA0pI7qO4nM1vB8cX5kZ2wT9yR6sL3dH0fJ7gP4aE1uQ8iV5mN2bC9xK6oW3rS0tY7zU4lD1hF8jG5eA2pI9qO6nM3vB0cX7kZ4wT1yR8sL5dH2fJ9gP6aE3uQ0iV7mN4bC1xK8oW5rS2tY9zU6lD3hF0jG7eA4pI1qO8nM5vB2cX9kZ6wT3yR0sL7dH4fJ1gP8aE5uQ2iV9mN6bC3xK0oW7rS4tY1zU8lD5hF2jG9eA6pI3qO0nM7vB4cX1kZ8wT5yR2sL9dH6f",
    "action": "otp_send"
  },
  "consent": {"marketing": false, "terms_version": "2024-06"},
  "referrer": "https://www.example.com/signup?utm_source=newsletter&utm_campaign=summer",
  "phone": "(202) 555-0100",
  "request_id": "9f1c2b7e-4d3a-4f8e-9a6b-1c2d3e4f5a6b"
}`)

var benchSink string

func BenchmarkJSONField(b *testing.B) {
	b.Run("top", func(b *testing.B) { benchJSONField(b, otpSendBody, "phone") })
	b.Run("nested", func(b *testing.B) { benchJSONField(b, otpSendBody, "captcha.action") })
	// The yardstick: encoding/json decoding the same field into a struct.
	b.Run("encoding_json", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(otpSendBody)))
		for b.Loop() {
			var req struct {
				Phone string `json:"phone"`
			}
			if err := json.Unmarshal(otpSendBody, &req); err != nil {
				b.Fatal(err)
			}
			benchSink = req.Phone
		}
	})
}

func benchJSONField(b *testing.B, body []byte, path string) {
	segs := strings.Split(path, ".")
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		v, found, err := JSONField(body, segs)
		if err != nil || !found {
			b.Fatalf("JSONField: %q, %v, %v", v, found, err)
		}
		benchSink = v
	}
}

func BenchmarkFormField(b *testing.B) {
	body := []byte("channel=sms&locale=en-US&captcha_token=" + strings.Repeat("0.kM3qv9Xo2nB7yT4wR1sZ8cL6fH5dJ0g", 20) +
		"&phone=%28202%29+555-0100&request_id=9f1c2b7e-4d3a-4f8e-9a6b-1c2d3e4f5a6b")
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		v, found, err := FormField(body, "phone")
		if err != nil || !found {
			b.Fatalf("FormField: %q, %v, %v", v, found, err)
		}
		benchSink = v
	}
}

func BenchmarkBodyKind(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if BodyKind("application/json; charset=utf-8", otpSendBody) != BodyJSON {
			b.Fatal("not JSON")
		}
	}
}

func BenchmarkParseMediaType(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if ParseMediaType(`application/x-www-form-urlencoded; charset="UTF-8"`) != MediaForm {
			b.Fatal("not a form")
		}
	}
}

// BenchmarkCheckMerged: a body phone against a typical query string and
// Cookie header, none of which names it.
func BenchmarkCheckMerged(b *testing.B) {
	src, _ := ParseSource("json:phone")
	query := []byte("utm_source=newsletter&utm_medium=email&utm_campaign=spring&ref=abc123")
	cookies := []byte("_ga=GA1.2.1234567890.1234567890; _gid=GA1.2.987654321.1234567890; session=9f1c2b7e4d3a4f8e9a6b1c2d3e4f5a6b; locale=en-US")
	b.ReportAllocs()
	b.SetBytes(int64(len(query) + len(cookies)))
	for b.Loop() {
		if err := src.CheckMerged(query, cookies, "+12025550100", true); err != nil {
			b.Fatal(err)
		}
	}
}
