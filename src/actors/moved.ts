// Cluster mode (P22): a command for a partition this instance has given away. Thrown by the shard
// that released it, carried to the front end as such, which sends the command to the owner.
export class MovedError extends Error {
  override name = 'MovedError';
  constructor(readonly partition: number) {
    super(`partition ${partition} is held by another instance`);
  }
}
