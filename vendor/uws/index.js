'use strict';
// Loads the uWebSockets.js addon that install.js built for the running Node.js ABI. There is no
// JavaScript stand-in: without the native server this throws, saying what is missing and how to
// build it.
const { existsSync } = require('fs');
const { join } = require('path');

const abi = process.versions.modules;
const file = join(__dirname, 'dist', `uws_${process.platform}_${process.arch}_${abi}.node`);
const how = `build it with this Node.js: \`node ${join(__dirname, 'install.js')}\` (or \`npm ci\`)`;
const fallback = process.env.UWS_USE_FALLBACK;
if (fallback !== undefined && /^(1|true)$/i.test(fallback)) {
  throw new Error(
    'uWebSockets.js: UWS_USE_FALLBACK is set, but this build has no JavaScript fallback: ' +
      'only the native server serves; unset UWS_USE_FALLBACK',
  );
}
if (!existsSync(file) || !existsSync(join(__dirname, 'dist', 'uws.js'))) {
  throw new Error(
    `uWebSockets.js: no native server built for Node.js ${process.version} ` +
      `(${process.platform} ${process.arch}, ABI ${abi}): ${file} is missing; ${how}`,
  );
}
module.exports = require('./dist/uws.js');
