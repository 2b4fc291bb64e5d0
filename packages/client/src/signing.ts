// `@path-node/client/signing`: the P5 request signature for those that sign or check requests
// themselves. `signingString` takes the body; `signingStringOfDigest` its hex SHA-256, which is
// what the node holds when it checks a request (it verifies with the string its clients sign).
export { signingString as signingStringOfDigest } from './signing-string.js';
export { signatureHeaders, signingString, type Signer } from './http.js';
