// Worker thread entry: one shard of actors over the shared LMDB log.
import { getHeapStatistics } from 'node:v8';
import { parentPort, workerData } from 'node:worker_threads';
import { systemClock } from '../clock.js';
import { fullCollection } from './collect.js';
import { DECIDERS } from '../domain/index.js';
import { signAnswers } from '../domain/budget/budget.js';
import { openThreadLog } from '../log/open.js';
import { newReference } from '../protocol/ids.js';
import { signingKeyFromSeed } from '../protocol/signing.js';
import { unseal } from '../protocol/sealing.js';
import { hashKeys } from '../protocol/identifiers.js';
import { turnBatcher, type FromWorker, type ToWorker, type WorkerData } from './messages.js';
import { Claims, Elsewhere } from './recovery.js';
import { MovedError } from './moved.js';
import { unreachable } from '../log/unavailable.js';
import { Shard } from './shard.js';

const data = workerData as WorkerData;
const port = parentPort!;
const { send, flush } = turnBatcher<FromWorker>((messages, transfer) =>
  port.postMessage(messages, transfer),
);

let signer = signingKeyFromSeed(data.seedHex);
const sealingKey = Buffer.from(data.sealingKeyHex, 'hex');
const pepper = Buffer.from(data.pepperHex, 'hex');
const log = await openThreadLog(data, data.holding);
const fatal = (error: unknown) => {
  send({ t: 'fatal', message: error instanceof Error ? error.message : String(error) });
  // Told at once: the node stops on it.
  flush();
};
const shard = new Shard({
  partitions: data.partitions,
  released: data.released,
  log,
  deciders: DECIDERS,
  clock: systemClock,
  member: data.member,
  signer: () => signer,
  newId: newReference,
  unseal: (sealed) => unseal(sealingKey, sealed),
  snapshotEveryRecords: data.limits.snapshot_every_records,
  mailboxDepthMax: data.limits.mailbox_depth_max,
  limits: data.limits,
  dev: data.dev,
  operatorWebhooks: data.operatorWebhooks,
  directoryChanges: data.store === null,
  onFatal: fatal,
  onTrouble: (error, partition) =>
    send({
      t: 'trouble',
      message: error instanceof Error ? error.message : String(error),
      partition,
      unavailable: unreachable(error),
    }),
  onEffects: (result) => send({ t: 'effects', result }),
  collect: fullCollection(),
});

port.on('message', (messages: ToWorker[]) => {
  for (const message of messages) received(message);
});

function received(message: ToWorker): void {
  switch (message.t) {
    case 'command':
      shard.submit(message.routed).then(
        (result) => send({ t: 'result', id: message.id, result }),
        (error: unknown) => failed(message.id, error),
      );
      break;
    case 'release':
    case 'adopt':
      (message.t === 'release' ? shard.release(message.partition) : shard.adopt(message.partition))
        .then(() => send({ t: 'done', id: message.id }))
        .catch((error: unknown) => failed(message.id, error));
      break;
    case 'hash-keys':
      send({
        t: 'hashed',
        id: message.id,
        outcome: hashKeys(pepper, message.items, message.offset, true),
      });
      break;
    case 'sign-answers':
      send({
        t: 'signed',
        id: message.id,
        text: signAnswers(message.answers, message.requester, message.signedAt, signer),
      });
      break;
    case 'census': {
      const heap = getHeapStatistics();
      send({
        t: 'counted',
        id: message.id,
        aggregates: shard.aggregatesInMemory(),
        pinned: shard.aggregatesPinned(),
        ...shard.residency,
        heapUsed: heap.used_heap_size,
        heapTotal: heap.total_heap_size,
        external: heap.external_memory,
      });
      break;
    }
    case 'signing-key':
      signer = signingKeyFromSeed(message.seedHex);
      break;
    case 'drain':
      void drain();
      break;
  }
}

function failed(id: number, error: unknown): void {
  const message = error instanceof Error ? error.message : String(error);
  send({
    t: 'failed',
    id,
    message,
    ...(error instanceof MovedError ? { moved: error.partition } : {}),
    ...(unreachable(error) ? { unavailable: true as const } : {}),
  });
}

async function drain(): Promise<void> {
  await shard.drained();
  shard.stop();
  await shard.snapshotAll();
  await log.close();
  send({ t: 'drained' });
}

// The partitions are checked before the node answers anyone ('ready'); they are folded while it
// answers, each at once if a command needs it first ('recovered' once all are).
const { checks, folds, ports } = data.helped;
const elsewhere = new Elsewhere(
  new Claims(checks, data.partitions),
  new Claims(folds, data.partitions),
  ports,
);
shard
  .check(elsewhere)
  .then((checked) => {
    send({ t: 'ready', checked });
    return shard.warm();
  })
  .then((stats) => {
    if (stats !== null) send({ t: 'recovered', stats });
  }, fatal);
