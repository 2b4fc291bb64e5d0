// GET /directory/feed: this node's change feed for
// member nodes (authenticated, ordered, resumable).
import { Type } from '@sinclair/typebox';
import { invalid } from '../protocol/errors.js';
import { Member, Signed } from '../protocol/responses.js';
import { Rfc3339, Sha256Hex } from '../protocol/schemas.js';
import { failure } from '../http/reply.js';
import type { RouteSpec } from '../http/router.js';
import type { Handler } from '../http/server.js';
import { queryParams, type Services } from '../http/services.js';
import type { FeedPublisher } from './feed.js';
import { FEED_OPERATION } from './follower.js';

const Sequence = Type.Integer({ minimum: 0 });

/** A page of the feed (feed.ts), signed: followers verify it with this node's keys. */
const FeedPage = Signed(
  {
    type: Type.Literal('path.directory.feed'),
    member: Member,
    endpoint: Type.String(),
    after: Sequence,
    next: Sequence,
    last: Sequence,
    entries: Type.Array(
      Type.Object({
        seq: Sequence,
        identifier_type: Type.String(),
        identifier_hash: Sha256Hex,
        visibility: Type.Union([Type.Literal('public'), Type.Literal('network'), Type.Null()]),
        at: Rfc3339,
      }),
    ),
  },
  "a page of this node's directory change feed, signed",
);

export function networkRoutes(services: Services, feed: FeedPublisher): RouteSpec<Handler>[] {
  return [
    {
      operation: FEED_OPERATION,
      summary: "Read this node's directory change feed",
      description:
        "Answers a signed page of this node's directory changes after a sequence number " +
        '(hashed keys and visibility only), from which member nodes build the network index ' +
        'that lookups answer from (SPEC D).',
      method: 'GET',
      path: '/directory/feed',
      auth: 'member',
      query: {
        after: { schema: Sequence, description: 'the last sequence number already read' },
        limit: {
          schema: Type.Integer({ minimum: 1, maximum: services.config.limits.feed_page_max }),
          description: 'entries at most on the page',
        },
      },
      responses: { 200: FeedPage },
      handler: (context) => {
        const query = queryParams(context);
        const after = Number(query.get('after') ?? '0');
        const limit = Number(query.get('limit') ?? '1000');
        if (!Number.isSafeInteger(after) || after < 0)
          return failure(invalid('after', 'after is a sequence number of at least 0'));
        const pageMax = services.config.limits.feed_page_max;
        if (!Number.isInteger(limit) || limit < 1 || limit > pageMax)
          return failure(invalid('limit', `limit is a whole number from 1 to ${pageMax}`));
        const { member, baseUrl } = services.config;
        const page = feed.page(after, limit, member, baseUrl, services.signer!());
        return page.then((body) => ({ status: 200, body, signed: true }));
      },
    },
  ];
}
