// Request bodies the cluster tests send: a payee receipt, settled, on the book rail.

/** A payee receipt of `value` EUR, paid by member beta. */
export const payeeReceipt = (value: string) => ({
  issued_by: 'payee',
  via: { rail: 'book', asset_type: 'fiat', asset_code: 'EUR' },
  received: { value, asset_type: 'fiat', asset_code: 'EUR' },
  rail_references: [{ type: 'book_entry', value: `BE-${value}` }],
  payer: { member: 'beta' },
});
