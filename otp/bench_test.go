package otp

import (
	"testing"

	"github.com/edge-gateway/edge/fields"
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

// BenchmarkJSONPhone is the measure: the phone field of a 1 KiB
// JSON body read and normalised to E.164, as the edge does per OTP request.
func BenchmarkJSONPhone(b *testing.B) {
	path := []string{"phone"}
	b.ReportAllocs()
	b.SetBytes(int64(len(otpSendBody)))
	for b.Loop() {
		v, found, err := fields.JSONField(otpSendBody, path)
		if err != nil || !found {
			b.Fatalf("JSONField: %q, %v, %v", v, found, err)
		}
		p, err := Normalize(v, "US")
		if err != nil {
			b.Fatal(err)
		}
		benchSink = p.E164
	}
}

func BenchmarkNormalize(b *testing.B) {
	for _, bc := range []struct{ name, raw, region string }{
		{"e164", "+12025550100", "US"},
		{"national", "(202) 555-0100", "US"},
		{"international", "+44 7400 123456", "US"},
		{"fullwidth", "+９７１ ５０ １２３ ４５６７", "US"},
		{"invalid", "12345", "US"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				p, _ := Normalize(bc.raw, bc.region)
				benchSink = p.E164
			}
		})
	}
}
