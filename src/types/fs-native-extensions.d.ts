// The part of fs-native-extensions that path-node uses (the package ships no typings).
declare module 'fs-native-extensions' {
  /** An exclusive advisory lock on the whole file, without waiting: false when another holds it. */
  export function tryLock(fd: number, options?: { shared?: boolean }): boolean;
}
