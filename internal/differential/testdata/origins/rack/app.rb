# Origin of the differential harness (internal/differential, docs/differential.md).
#
# Rack (Debian's ruby-rack 2.2) on WEBrick (ruby-webrick), booted with
# Rack::Handler::WEBrick as `rackup -s webrick` does, reading the identity
# fields the way Rack applications (and Sinatra and Rails, which build on
# Rack::Request) do, and echoing what each idiom read:
#
#   /health            200 "ok" (readiness)
#   /v/rack-post       Rack::Request#POST[NAME]   (the body's form)
#   /v/rack-params     Rack::Request#params[NAME] (GET merged with POST)
#   /v/rack-json       JSON.parse(request.body.read)[NAME]
#   /probe/*           200: a probe the edge forwarded
#
# A parser exception is the application's error: it read nothing, and the
# echo says so. The echo is JSON: {"variant", "ct" (hex of the Content-Type
# the app saw), "fields": {NAME: {"type", "values": [hex of each leaf's
# bytes]}}, "error"}. Usage: ruby app.rb PORT

require 'json'
require 'rack'
require 'webrick'

FIELDS = %w[phone username email challenge_id code].freeze

def leaves(v, out)
  case v
  when Hash then v.each_value { |x| leaves(x, out) }
  when Array then v.each { |x| leaves(x, out) }
  when nil then nil
  else out << v.to_s.b.unpack1('H*')
  end
end

def reading(v)
  return { 'type' => 'absent', 'values' => [] } if v.nil?
  out = []
  leaves(v, out)
  { 'type' => v.class.name.downcase, 'values' => out }
end

def echo(env, variant, src, error = '')
  fields = {}
  FIELDS.each { |f| fields[f] = reading(src.is_a?(Hash) ? src[f] : nil) }
  body = JSON.generate(
    'variant' => variant,
    'ct' => (env['CONTENT_TYPE'] || '').b.unpack1('H*'),
    'fields' => fields,
    'error' => error
  )
  [200, { 'Content-Type' => 'application/json', 'X-Differential-Variant' => variant }, [body]]
end

APP = lambda do |env|
  req = Rack::Request.new(env)
  path = req.path_info
  next [200, { 'Content-Type' => 'text/plain' }, ['ok']] if path == '/health'
  next echo(env, 'probe', nil) if path.start_with?('/probe/')

  variant = path.delete_prefix('/v/')
  begin
    case variant
    when 'rack-post' then echo(env, variant, req.POST)
    when 'rack-params' then echo(env, variant, req.params)
    when 'rack-json' then echo(env, variant, JSON.parse(req.body.read))
    else [404, { 'Content-Type' => 'text/plain' }, ['no such variant']]
    end
  rescue StandardError => e # the application would fail: it read nothing
    echo(env, variant, nil, "#{e.class}: #{e.message}"[0, 200])
  end
end

# TCP_NODELAY on the listener (Linux copies it to each accepted socket):
# WEBrick writes an answer's header and body separately, and without it the
# body waits for the client's delayed ACK, about 40 ms an answer behind the
# edge's HTTP client. It changes how bytes are sent, nothing of how a
# request is read.
Rack::Handler::WEBrick.run(
  APP,
  Host: '127.0.0.1',
  Port: Integer(ARGV[0]),
  AccessLog: [],
  Logger: WEBrick::Log.new($stderr, WEBrick::Log::WARN)
) do |server|
  server.listeners.each { |s| s.setsockopt(Socket::IPPROTO_TCP, Socket::TCP_NODELAY, 1) }
end
