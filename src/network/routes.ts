// GET /directory/feed: this node's change feed for
// member nodes (authenticated, ordered, resumable).
import { invalid } from '../protocol/errors.js';
import { failure } from '../http/reply.js';
import type { RouteSpec } from '../http/router.js';
import type { Handler } from '../http/server.js';
import { queryParams, type Services } from '../http/services.js';
import type { FeedPublisher } from './feed.js';
import { FEED_OPERATION } from './follower.js';

export function networkRoutes(services: Services, feed: FeedPublisher): RouteSpec<Handler>[] {
  return [
    {
      operation: FEED_OPERATION,
      method: 'GET',
      path: '/directory/feed',
      auth: 'member',
      handler: (context) => {
        const query = queryParams(context);
        const after = Number(query.get('after') ?? '0');
        const limit = Number(query.get('limit') ?? '1000');
        if (!Number.isSafeInteger(after) || after < 0)
          return failure(invalid('after', 'after is a sequence number of at least 0'));
        const pageMax = services.config.limits.feed_page_max;
        if (!Number.isInteger(limit) || limit < 1 || limit > pageMax)
          return failure(invalid('limit', `limit is a whole number from 1 to ${pageMax}`));
        return {
          status: 200,
          body: feed.page(
            after,
            limit,
            services.config.member,
            services.config.baseUrl,
            services.signer!(),
          ),
          signed: true,
        };
      },
    },
  ];
}
