-- A deduction's, transfer's or batch deduction's view shows what its refunds
-- gave back: its refund sagas are found by their original.
CREATE INDEX saga_refund_of ON saga (tenant, (input->>'original_saga_id')) WHERE type = 'refund';
