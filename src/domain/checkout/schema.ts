// Wire schemas of SPEC I (checkout sessions).
import { Type } from '@sinclair/typebox';
import { Rfc3339, validator } from '../../protocol/schemas.js';

const Url = Type.String({ minLength: 8, maxLength: 2048, pattern: '^https?://' });

export const CreateSession = Type.Object({
  request_reference: Type.String({ pattern: '^req_[0-9a-f]{32}$' }),
  success_url: Url,
  cancel_url: Url,
  webhook_url: Type.Optional(Url),
  expires_at: Type.Optional(Rfc3339),
});

export const validateCreateSession = validator(CreateSession);
