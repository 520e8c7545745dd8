// The routes of custom domains (api/custom-domains.ts, decision 055), described for the OpenAPI document beside
// openapi-service.ts.
import { Type } from '../kinds/typebox.js';
import type { ExtraPaths } from './openapi-extra.js';

const Str = Type.String;
const opt = Type.Optional;
const TAG = 'CustomDomain';

const CustomDomain = Type.Object(
  {
    metadata: Type.Object(
      {
        name: Str({ description: 'the domain, e.g. app.example.com' }),
        displayName: opt(Str()),
        workspace: Str(),
        sharedFromWorkspace: opt(
          Str({ description: 'the owner, when this is a copy shared with this workspace' }),
        ),
      },
      { additionalProperties: true },
    ),
    spec: Type.Object(
      {
        domainType: opt(Type.Union([Type.Literal('previews'), Type.Literal('applications')])),
        region: opt(Str()),
        status: Type.Union([Type.Literal('pending'), Type.Literal('verified'), Type.Literal('failed')]),
        txtRecords: Type.Record(Str(), Str(), {
          description: 'publish each name with its value as a TXT record',
        }),
        lastVerifiedAt: opt(Str()),
        verificationError: opt(Str()),
      },
      { additionalProperties: true },
    ),
  },
  { $id: 'CustomDomain' },
);
const CustomDomainInput = Type.Object(
  {
    metadata: Type.Object({ name: Str(), displayName: opt(Str()) }, { additionalProperties: true }),
    spec: opt(Type.Object({}, { additionalProperties: true })),
  },
  { $id: 'CustomDomainInput' },
);
const ShareTarget = Type.Object({ workspace: Str(), status: Str(), workspaceDisplayName: opt(Str()) });

export const DOMAIN_PATHS: ExtraPaths = {
  '/customdomains': {
    get: {
      operationId: 'listCustomDomains',
      summary: "The workspace's custom domains, its own and those shared with it",
      tag: TAG,
      response: Type.Array(CustomDomain),
    },
    post: {
      operationId: 'createCustomDomain',
      summary: 'Claim a domain: pending until its TXT record is published and verified',
      tag: TAG,
      role: 'admin',
      body: CustomDomainInput,
      response: CustomDomain,
    },
  },
  '/applications/{applicationName}/customdomains': {
    post: {
      operationId: 'createApplicationCustomDomain',
      summary: 'Claim a domain for applications (the application must exist); as POST /customdomains',
      tag: TAG,
      role: 'admin',
      requiresKind: 'Application',
      body: CustomDomainInput,
      response: CustomDomain,
    },
  },
  '/customdomains/{domainName}': {
    get: { operationId: 'getCustomDomain', summary: 'One custom domain', tag: TAG, response: CustomDomain },
    put: {
      operationId: 'updateCustomDomain',
      summary: "Change a domain's display name, labels, type or region (the owner only)",
      tag: TAG,
      role: 'admin',
      body: CustomDomainInput,
      response: CustomDomain,
    },
    delete: {
      operationId: 'deleteCustomDomain',
      summary: "Delete a domain (the owner's delete also removes its shares and their copies)",
      tag: TAG,
      role: 'admin',
      response: CustomDomain,
    },
  },
  '/customdomains/{domainName}/verify': {
    post: {
      operationId: 'verifyCustomDomain',
      summary: 'Read the TXT record now: verified (the domain is this workspace’s) or failed with why',
      tag: TAG,
      role: 'admin',
      response: CustomDomain,
    },
  },
  '/customdomains/{domainName}/share': {
    get: {
      operationId: 'listCustomDomainShares',
      summary: 'The workspaces a domain is offered to (pending) or shared with (active)',
      tag: TAG,
      response: Type.Array(ShareTarget),
    },
    post: {
      operationId: 'shareCustomDomain',
      summary: 'Offer a verified domain to another workspace; nothing is granted until its admin accepts',
      tag: TAG,
      role: 'admin',
      body: Type.Object({ targetWorkspace: Str() }),
      response: CustomDomain,
    },
  },
  '/customdomains/{domainName}/share/{targetWorkspace}': {
    delete: {
      operationId: 'unshareCustomDomain',
      summary: 'Revoke an offer or a share (the copy in the target goes)',
      tag: TAG,
      role: 'admin',
      response: CustomDomain,
    },
  },
  '/customdomains/{domainName}/accept': {
    post: {
      operationId: 'acceptCustomDomainShare',
      summary: 'Accept a domain offered to this workspace: its record is copied here',
      tag: TAG,
      role: 'admin',
      response: CustomDomain,
    },
  },
};
