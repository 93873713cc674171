<?php
// Origin of the differential harness (internal/differential, docs/differential.md):
// PHP's built-in server (`php -S 127.0.0.1:PORT app.php`, Debian's php-cli and its
// php.ini: variables_order "GPCS", request_order "GP") reading the identity fields
// the way PHP applications do, and echoing what each idiom read.
//
//   /health               200 "ok" (readiness)
//   /v/php-post           $_POST['phone']
//   /v/php-request        $_REQUEST['phone'] (query and body merged, request_order)
//   /v/php-json           json_decode(file_get_contents('php://input'), true)['phone']
//   /v/php-parse-str      parse_str(file_get_contents('php://input'), $body); $body['phone']
//                         (how PHP reads a PUT or PATCH form, which $_POST never holds)
//   /probe/*              200: a probe the edge forwarded
//
// The echo is JSON: {"variant", "ct" (hex of the Content-Type PHP saw),
// "fields": {NAME: {"type", "values": [hex of each string leaf]}}, "error"}.
// Values are hex so that no byte is lost to an encoder; arrays are walked to
// their leaves, since an application that got an array may still use what is
// inside it.

const FIELDS = ['phone', 'username', 'email', 'challenge_id', 'code'];

function leaves($v, array &$out): void {
    if (is_array($v)) {
        foreach ($v as $x) {
            leaves($x, $out);
        }
        return;
    }
    if ($v === null) {
        return;
    }
    if (is_bool($v)) {
        $v = $v ? '1' : '';
    }
    $out[] = bin2hex((string)$v);
}

function reading($v): array {
    if ($v === null) {
        return ['type' => 'absent', 'values' => []];
    }
    $out = [];
    leaves($v, $out);
    return ['type' => is_array($v) ? 'array' : gettype($v), 'values' => $out];
}

function echo_json(string $variant, ?array $src, string $error = ''): void {
    header('X-Differential-Variant: ' . $variant);
    header('Content-Type: application/json');
    $fields = [];
    foreach (FIELDS as $f) {
        $fields[$f] = reading(is_array($src) && array_key_exists($f, $src) ? $src[$f] : null);
    }
    echo json_encode([
        'variant' => $variant,
        'ct' => bin2hex($_SERVER['CONTENT_TYPE'] ?? ''),
        'fields' => $fields,
        'error' => $error,
    ]);
}

$path = parse_url($_SERVER['REQUEST_URI'], PHP_URL_PATH);
if ($path === '/health') {
    echo 'ok';
    return true;
}
if (strncmp($path, '/probe/', 7) === 0) {
    echo_json('probe', null);
    return true;
}
switch ($path) {
case '/v/php-post':
    echo_json('php-post', $_POST);
    break;
case '/v/php-request':
    echo_json('php-request', $_REQUEST);
    break;
case '/v/php-json':
    $d = json_decode(file_get_contents('php://input'), true);
    echo_json('php-json', is_array($d) ? $d : null, json_last_error() === JSON_ERROR_NONE ? '' : json_last_error_msg());
    break;
case '/v/php-parse-str':
    parse_str(file_get_contents('php://input'), $body);
    echo_json('php-parse-str', $body);
    break;
default:
    http_response_code(404);
    echo 'no such variant';
}
return true;
