// @noble/ed25519 with the SHA-512 it signs and verifies with, from @noble/hashes. Every use goes
// through this module's `ed`, so the setting travels with it: the package says it has no side
// effects (`sideEffects: false`), which lets a bundler drop a module imported only for one.
import * as ed from '@noble/ed25519';
import { sha512 } from '@noble/hashes/sha2.js';

ed.hashes.sha512 = sha512;

export { ed };
