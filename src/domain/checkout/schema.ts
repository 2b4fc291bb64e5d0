// Wire schemas of SPEC I (checkout sessions).
import { Type } from '@sinclair/typebox';
import { HttpUrl as Url, Reference, Rfc3339, validator } from '../../protocol/schemas.js';

export const CreateSession = Type.Object({
  request_reference: Reference('req', 'a request reference'),
  success_url: Url,
  cancel_url: Url,
  webhook_url: Type.Optional(Url),
  expires_at: Type.Optional(Rfc3339),
});

export const validateCreateSession = validator(CreateSession);
