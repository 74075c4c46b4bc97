export const UPSTREAM = 'UPSTREAM_DISPATCHER';
/** Where route contracts' `credential_ref` names are resolved (`UpstreamCredentials`). */
export const UPSTREAM_CREDENTIALS = 'UPSTREAM_CREDENTIALS';
