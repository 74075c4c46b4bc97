/** Test fixture: the counts every terminal dispatch reply carries, for one answered candidate. */
export const ONE_CANDIDATE_COUNTS = {
  attempt_id: 'att-1',
  provider_request_id: null,
  requested_candidates: null,
  effective_candidates: 1,
  returned_candidates: 1,
  candidates: [],
};
